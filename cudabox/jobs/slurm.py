"""`cudabox export slurm`: the sbatch script that runs a project's image on a Slurm compute node.

Slurm itself does not run containers, so the script picks the way the
cluster offers (docs/slurm.md): pyxis/enroot (`srun --container-image`) when
srun knows that flag, else the node's Docker engine, else Apptainer. The
image reaches the node by one of three transports: `registry` (the node
pulls it), `shared` (a `docker save` archive on a filesystem every node
mounts) or `local` (single-node clusters: the node's engine already has it).

Every value that reaches the script is validated here and shell-quoted
(shlex), because a job script runs with the user's full rights on the
cluster. #SBATCH lines are parsed by sbatch, not by a shell, so their values
must not need quoting at all and are held to strict patterns instead.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ..errors import InputError

TRANSPORTS = ("local", "shared", "registry")
RUNTIMES = ("auto", "pyxis", "docker", "apptainer")
MARKER = "cudabox"  # --comment prefix: how `cudabox jobs` finds its jobs
HOME = "/home/cudabox"  # the image user's home; a tmpfs owned by the job's user, as `cudabox run` does

SAFE = re.compile(r"^[A-Za-z0-9_.,:@%+=/-]+$")  # what may stand unquoted on an #SBATCH line
PARTITION = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
TIME = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_SBATCH_ARG = re.compile(r"^--[a-z][a-z-]*(=[A-Za-z0-9_.,:@%+=/-]+)?$")
_ABS = re.compile(r"^/[^\x00-\x1f]*$")


@dataclass(frozen=True)
class SlurmJob:
    """Everything the script needs. `command` runs in `workdir` inside the image."""

    image: str
    command: tuple[str, ...]
    project_dir: str  # absolute; mounted at workdir (the nodes must see it: a shared filesystem)
    workdir: str = "/workspace"
    job_name: str = "cudabox"
    comment: str = MARKER
    output: str | None = None  # absolute path pattern for --output (%j = job id)
    partition: str | None = None
    gpus: int = 0  # per node
    time: str | None = None
    nodes: int = 1
    transport: str = "local"
    runtime: str = "auto"  # auto: pyxis if srun has it (decided at export), else docker, else apptainer
    archive: str | None = None  # transport shared: the docker-save tar (or the .sqsh for pyxis)
    env: tuple[tuple[str, str], ...] = ()
    sbatch_args: tuple[str, ...] = field(default=())  # extra `--flag=value` lines (account, qos, ...)

    def validate(self) -> "SlurmJob":
        if not self.command:
            raise InputError("no command: give the command to run after `--` (e.g. -- python train.py)")
        if not _IMAGE.match(self.image):
            raise InputError(f"image {self.image!r} is not a valid image reference")
        if self.partition is not None and not PARTITION.match(self.partition):
            raise InputError(f"--partition: {self.partition!r} is not a partition name")
        if self.time is not None and not TIME.match(self.time):
            raise InputError(f"--time: {self.time!r}: expected minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED")
        if self.nodes < 1 or self.gpus < 0:
            raise InputError("--nodes must be >= 1 and --gpus >= 0")
        if self.transport not in TRANSPORTS:
            raise InputError(f"--transport: {self.transport!r}: expected one of {', '.join(TRANSPORTS)}")
        if self.runtime not in RUNTIMES:
            raise InputError(f"--runtime: {self.runtime!r}: expected one of {', '.join(RUNTIMES)}")
        if self.transport == "shared" and not (self.archive and _ABS.match(self.archive)):
            raise InputError("--transport shared needs an absolute --shared-dir every node mounts")
        if self.transport == "local" and self.nodes > 1:
            raise InputError("--transport local works on one node only (the image is in that node's engine); "
                             "use --transport shared or registry with --nodes > 1")
        for what, value in (("job name", self.job_name), ("comment", self.comment), ("--output", self.output)):
            if value is not None and not SAFE.match(value):
                raise InputError(f"{what}: {value!r} must not contain spaces or shell characters "
                                 "(it goes on an #SBATCH line)")
        for path in (self.project_dir, self.workdir):
            if not _ABS.match(path):
                raise InputError(f"{path!r}: expected an absolute path without control characters")
        for arg in self.sbatch_args:
            if not _SBATCH_ARG.match(arg):
                raise InputError(f"--sbatch-arg {arg!r}: expected --name or --name=value without spaces")
        for key, _ in self.env:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise InputError(f"environment variable name {key!r} is not valid")
        return self


def script(job: SlurmJob, *, has_pyxis: bool = False) -> str:
    """The sbatch script. `has_pyxis`: srun on this cluster knows --container-image (runtime auto)."""
    job.validate()
    runtime = "pyxis" if job.runtime == "pyxis" or (job.runtime == "auto" and has_pyxis) else job.runtime
    q = shlex.quote
    lines = ["#!/bin/bash",
             f"# Generated by cudabox; submit with sbatch. Runtime: {runtime}, image transport: {job.transport}.",
             f"#SBATCH --job-name={job.job_name}", f"#SBATCH --comment={job.comment}",
             f"#SBATCH --nodes={job.nodes}", "#SBATCH --ntasks-per-node=1"]
    lines += [f"#SBATCH --output={job.output}"] if job.output else []
    lines += [f"#SBATCH --partition={job.partition}"] if job.partition else []
    lines += [f"#SBATCH --time={job.time}"] if job.time else []
    lines += [f"#SBATCH --gpus-per-node={job.gpus}"] if job.gpus else []
    lines += [f"#SBATCH {arg}" for arg in job.sbatch_args]
    lines += ["set -euo pipefail",
              f"image={q(job.image)}", f"project={q(job.project_dir)}", f"workdir={q(job.workdir)}",
              f"archive={q(job.archive or '')}", f"command=({' '.join(q(c) for c in job.command)})"]
    lines += [f"export {k}={q(v)}" for k, v in job.env]
    if runtime == "pyxis":
        lines += _pyxis(job)
    else:
        inner = _node_script(job, runtime)
        if job.nodes == 1:
            lines += inner
        else:  # one container per node; the inner script is a single quoted word
            lines += ["export image project workdir archive", "srun --ntasks-per-node=1 --kill-on-bad-exit=1 "
                      "bash -c " + q("\n".join(["set -euo pipefail", "command=(\"$@\")"] + inner))
                      + ' cudabox-step "${command[@]}"']
    return "\n".join(lines) + "\n"


def _pyxis(job: SlurmJob) -> list[str]:
    """pyxis/enroot: srun runs the container itself; the image is a registry ref or a squashfs."""
    if job.transport == "registry":
        first, _, rest = job.image.partition("/")
        image = f"{first}#{rest}" if "." in first or ":" in first else job.image  # enroot: REGISTRY#IMAGE
        source = [f"src={shlex.quote(image)}"]
    elif job.transport == "shared":
        source = ['src="$archive"  # a squashfs made with: enroot import -o ARCHIVE dockerd://IMAGE']
    else:
        source = ['src="${TMPDIR:-/tmp}/cudabox-${SLURM_JOB_ID}.sqsh"',
                  'trap \'rm -f "$src"\' EXIT',
                  'enroot import -o "$src" "dockerd://$image"']
    gpus = " --gpus-per-node=$SLURM_GPUS_PER_NODE" if job.gpus else ""
    return source + [f"srun --ntasks-per-node=1{gpus} --container-image=\"$src\" "
                     '--container-mounts="$project:$workdir" --container-workdir="$workdir" "${command[@]}"']


def _node_script(job: SlurmJob, runtime: str) -> list[str]:
    """What runs on each node: fetch the image, then docker (or apptainer) runs the command."""
    docker, apptainer = _docker(job), _apptainer(job)
    if runtime == "docker":
        return docker
    if runtime == "apptainer":
        return apptainer
    return (["if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then"]
            + ["  " + line for line in docker]
            + ["elif command -v apptainer >/dev/null 2>&1 || command -v singularity >/dev/null 2>&1; then"]
            + ["  " + line for line in apptainer]
            + ["else", '  echo "cudabox: no container runtime on $(hostname) (docker, apptainer)" >&2',
               "  exit 127", "fi"])


def _docker(job: SlurmJob) -> list[str]:
    fetch = {
        "local": ['docker image inspect "$image" >/dev/null 2>&1 || { echo "cudabox: image $image is not in '
                  'the engine of $(hostname); use --transport shared or registry" >&2; exit 125; }'],
        "shared": ['docker image inspect "$image" >/dev/null 2>&1 || docker load -q -i "$archive"'],
        "registry": ['docker image inspect "$image" >/dev/null 2>&1 || docker pull -q "$image"'],
    }[job.transport]
    gpus = []
    if job.gpus:  # Slurm's allocation, as docker's device list (global ids; CUDA_VISIBLE_DEVICES otherwise)
        gpus = ['devices="${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}}"',
                'gpu_args=(); [ -n "$devices" ] && gpu_args=(--gpus "\\"device=$devices\\"")']
    env = "".join(f" -e {k}" for k, _ in job.env)
    gpu_args = ' ${gpu_args[@]+"${gpu_args[@]}"}' if job.gpus else ""
    return fetch + gpus + [
        'name="cudabox-${SLURM_JOB_ID}-${SLURM_NODEID:-0}"',
        'cleanup() { docker rm -f "$name" >/dev/null 2>&1 || true; }',
        "trap 'cleanup; exit 143' TERM INT",
        f'docker run --rm --init --name "$name"{gpu_args} '
        f'--ipc=host --user "$(id -u):$(id -g)" -e HOME={HOME} '
        f'--tmpfs "{HOME}:exec,mode=0755,uid=$(id -u),gid=$(id -g)" '
        f'-v "$project:$workdir" -w "$workdir"{env} '
        '-e SLURM_JOB_ID -e SLURM_NODEID -e SLURM_NNODES -e SLURM_PROCID "$image" "${command[@]}" &',
        'wait "$!"']


def _apptainer(job: SlurmJob) -> list[str]:
    source = {"local": 'src="docker-daemon://$image"', "shared": 'src="docker-archive://$archive"',
              "registry": 'src="docker://$image"'}[job.transport]
    nv = " --nv" if job.gpus else ""
    return [source, 'runner="$(command -v apptainer || command -v singularity)"',
            f'exec "$runner" exec{nv} --bind "$project:$workdir" --pwd "$workdir" "$src" "${{command[@]}}"']
