"""`cudabox run --on slurm` and `cudabox jobs`: submit, follow the job, report how it ended.

Slurm is reached through slurmctl.py only; images through the engine. The
job's output file is tailed while it runs (the project directory, where it
is written, must be visible from the compute nodes anyway, since it is
mounted into the container).
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentProblem, InputError
from .slurmctl import cancel, enroot_import, has_pyxis, job_info, show_jobs, submit

def _drain(path: Path, pos: int, out) -> int:
    try:
        with open(path, "rb") as fh:
            fh.seek(pos)
            data = fh.read()
    except FileNotFoundError:
        return pos
    if data:
        out.write(data)
        out.flush()
    return pos + len(data)


def follow(job_id: str, output: Path, *, out=None, err=None, poll: float = 0.5, cancel_wait: float = 30.0) -> int:
    """Stream the job's output until it ends; return its exit status (130 after Ctrl-C, which scancels it)."""
    out = out or sys.stdout.buffer
    err = err or sys.stderr
    pos, last, unknown, cancelled, deadline = 0, None, 0, False, None
    while True:
        try:
            info = job_info(job_id)
            pos = _drain(output, pos, out)
            state = info.state.split()[0]
            if state != last:
                reason = info.fields.get("Reason", "None")
                detail = f" ({reason})" if state == "PENDING" and reason not in ("None", "") else ""
                where = f" on {info.fields['NodeList']}" if state == "RUNNING" and info.fields.get("NodeList") else ""
                err.write(f"cudabox: Slurm job {job_id} {state}{detail}{where}\n")
                err.flush()
                last = state
            if info.done:
                time.sleep(poll)  # the node may still flush the last lines
                _drain(output, pos, out)
                break
            unknown = unknown + 1 if state == "UNKNOWN" else 0
            if unknown > 20:
                raise EnvironmentProblem(f"Slurm job {job_id}: the controller no longer knows it and accounting "
                                         "is off; its output is in " + str(output))
            if deadline is not None and time.monotonic() > deadline:
                err.write(f"cudabox: Slurm job {job_id} still {state} after scancel; leaving it\n")
                return cancelled
            time.sleep(poll)
        except KeyboardInterrupt as exc:
            if cancelled:  # a second Ctrl-C: stop waiting
                return cancelled
            cancel(job_id)
            err.write(f"\ncudabox: interrupted: cancelled Slurm job {job_id} (scancel)\n")
            # the exit code to give: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP (cudabox.interrupt)
            cancelled, deadline = getattr(exc, "exit_code", 130), time.monotonic() + cancel_wait
    if cancelled:
        return cancelled
    status = info.exit_status
    if info.state != "COMPLETED":
        node = info.fields.get("NodeList") or "?"
        err.write(f"cudabox: error: Slurm job {job_id} {info.state} on {node} (exit code {info.exit_code}); "
                  f"output: {output}\n")
    return status


def ship(image: str, transport: str, *, shared_dir: str | None = None, registry: str | None = None,
         push: bool = False, pyxis: bool = False, engine=None) -> tuple[str, str | None]:
    """Make the image reachable from the nodes; returns (image reference for the script, archive path)."""
    from ..engine import connect

    if transport == "local":
        return image, None
    if transport == "registry":
        if not registry:
            raise InputError("--transport registry needs --registry HOST/PATH (where the nodes pull from)")
        prefix = registry.rstrip("/")
        remote = image if image.startswith(prefix + "/") else f"{prefix}/{image}"
        if push:
            engine = engine or connect()
            engine.tag(image, remote)
            engine.push(remote)
        return remote, None
    if not shared_dir or not os.path.isabs(shared_dir):
        raise InputError("--transport shared needs --shared-dir DIR: an absolute path every node mounts")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", image)
    archive = Path(shared_dir) / (name + (".sqsh" if pyxis else ".tar"))
    if not archive.exists():  # project tags are content addresses: an existing archive is this image
        archive.parent.mkdir(parents=True, exist_ok=True)
        tmp = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
        if pyxis:
            enroot_import(image, tmp)
        else:
            (engine or connect()).save(image, tmp)
        os.replace(tmp, archive)
    return image, str(archive)


def list_jobs(*, all_users: bool = False) -> list[dict]:
    """The cudabox jobs the controller still knows (pending, running, recently ended)."""
    code, rows, said = show_jobs()
    if code != 0 and "No jobs" not in said:
        raise EnvironmentProblem("scontrol show job failed: " + (said.strip() or f"exit {code}"))
    jobs = []
    for f in rows:
        comment = f.get("Comment", "")
        if comment != "cudabox" and not comment.startswith("cudabox:"):
            continue
        uid = re.search(r"\((\d+)\)", f.get("UserId", ""))
        if not all_users and uid and int(uid.group(1)) != os.getuid():
            continue
        parts = comment.split(":")
        job_id = f.get("JobId")
        if f.get("ArrayJobId") and f.get("ArrayTaskId"):
            job_id = f"{f['ArrayJobId']}_{f['ArrayTaskId']}"
        jobs.append({"job_id": job_id, "name": f.get("JobName"), "state": f.get("JobState"),
                     "exit_code": f.get("ExitCode"), "elapsed": f.get("RunTime"), "nodes": f.get("NodeList"),
                     "partition": f.get("Partition"), "project": parts[1] if len(parts) > 1 else None,
                     "lock": parts[2] if len(parts) > 2 else None, "output": f.get("StdOut"),
                     "submitted": f.get("SubmitTime"), "user": f.get("UserId")})
    return sorted(jobs, key=lambda j: int(j["job_id"].split("_")[0]) if j["job_id"] else 0)


# --------------------------------------------------------------------------- the project's job


@dataclass
class SlurmOptions:
    """What `run --on slurm` / `export slurm` were asked (flags, or CUDABOX_SLURM_* / CUDABOX_REGISTRY)."""

    partition: str | None = None
    gpus: int = 0
    time: str | None = None
    nodes: int = 1
    transport: str = "local"
    runtime: str = "auto"
    shared_dir: str | None = None
    registry: str | None = None
    push: bool = False
    output_dir: Path | None = None
    image: str | None = None  # another image than the project's (it must hold the project's workdir layout)
    env: tuple[str, ...] = ()  # KEY=VALUE
    sbatch_args: tuple[str, ...] = ()


def slurm_job(lock, project: Path, command: list[str], opts: SlurmOptions, *, image: str,
              archive: str | None = None):
    from .slurm import MARKER, SlurmJob

    if opts.transport == "registry" and not (opts.registry or opts.image):
        raise InputError("--transport registry needs --registry HOST/PATH (or CUDABOX_REGISTRY): where the nodes "
                         "pull the image from")
    output_dir = Path(opts.output_dir or Path(project) / ".cudabox" / "slurm").resolve()
    env = []
    for item in opts.env:
        key, eq, value = item.partition("=")
        env.append((key, value if eq else os.environ.get(key, "")))
    return SlurmJob(image=image, command=tuple(command), project_dir=str(Path(project).resolve()),
                    workdir=lock.project.workdir, job_name=f"cudabox-{lock.project.name}",
                    comment=f"{MARKER}:{lock.project.name}:{lock.hash[:12]}",
                    output=str(output_dir / "cudabox-%j.out"), partition=opts.partition, gpus=opts.gpus,
                    time=opts.time, nodes=opts.nodes, transport=opts.transport, runtime=opts.runtime,
                    archive=archive, env=tuple(env), sbatch_args=tuple(opts.sbatch_args)).validate()


def image_ref(lock, opts: SlurmOptions, project: Path) -> str:
    """The image the nodes run: --image, else the project's tag (registry-qualified for --transport registry)."""
    from ..image.build import project_tag

    image = opts.image or project_tag(lock, project_dir=project)
    prefix = (opts.registry or "").rstrip("/")
    if opts.transport == "registry" and prefix and not image.startswith(prefix + "/"):
        image = f"{prefix}/{image}"
    return image


def export(project: Path, command: list[str], opts: SlurmOptions) -> str:
    """The sbatch script for the project, without building, shipping or submitting anything."""
    from ..lock.lockfile import read_lock
    from .slurm import script

    lock = read_lock(project)
    archive = None
    if opts.transport == "shared":
        if not opts.shared_dir or not os.path.isabs(opts.shared_dir):
            raise InputError("--transport shared needs --shared-dir DIR: an absolute path every node mounts")
        pyxis = opts.runtime == "pyxis"
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", image_ref(lock, opts, project))
        archive = str(Path(opts.shared_dir) / (name + (".sqsh" if pyxis else ".tar")))
    job = slurm_job(lock, project, command, opts, image=image_ref(lock, opts, project), archive=archive)
    return script(job, has_pyxis=opts.runtime == "auto" and has_pyxis())


def run(project: Path, command: list[str], opts: SlurmOptions, *, detach: bool = False, say=None) -> int:
    """Build (if needed), ship, submit; then follow the job unless detached. Returns the exit status."""
    from .run import fresh_lock
    from .slurm import script

    say = say or (lambda text: (sys.stderr.write(f"cudabox: {text}\n"), sys.stderr.flush()))
    project = Path(project)
    lock = fresh_lock(project)
    pyxis = opts.runtime == "pyxis" or (opts.runtime == "auto" and has_pyxis())
    if opts.image or (opts.transport == "registry" and not opts.push):
        from ..image.build import project_tag

        local = opts.image or project_tag(lock, project_dir=project)  # used as it is: already where the nodes find it
    else:
        from ..image.build import ensure_image

        local = ensure_image(project, lock=lock, progress=True).tag
    image, archive = ship(local, opts.transport, shared_dir=opts.shared_dir, registry=opts.registry,
                          push=opts.push, pyxis=pyxis)
    job = slurm_job(lock, project, command, opts, image=image, archive=archive)
    Path(job.output).parent.mkdir(parents=True, exist_ok=True)
    job_id = submit(script(job, has_pyxis=pyxis), keep_dir=Path(job.output).parent)
    output = Path(job.output.replace("%j", job_id))
    say(f"submitted Slurm job {job_id} ({image}; output {output})")
    if detach:
        print(job_id)
        return 0
    return follow(job_id, output)
