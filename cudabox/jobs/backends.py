"""Where `cudabox run` runs: this machine's engine, a Slurm job or a Kubernetes Job — one registry.

Every backend takes the RunOptions the CLI collected and the cluster settings
(`Cluster`); what `run` has no flag for comes from the environment, as
docs/slurm.md and docs/kubernetes.md document. Also the pieces `export slurm`
and `export k8s` share with `run --on`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError


@dataclass
class Cluster:
    """Settings of the cluster backends; None: the environment's value (CUDABOX_SLURM_*, CUDABOX_REGISTRY)."""

    partition: str | None = None
    time: str | None = None
    nodes: int = 1
    transport: str = "local"
    runtime: str | None = None
    shared_dir: str | None = None
    registry: str | None = None
    push: bool | None = None
    output_dir: str | None = None
    image: str | None = None

    def from_env(self) -> "Cluster":
        env = os.environ.get
        return Cluster(self.partition, self.time, self.nodes, self.transport,
                       self.runtime or env("CUDABOX_SLURM_RUNTIME") or "auto",
                       self.shared_dir or env("CUDABOX_SLURM_SHARED_DIR"), self.registry or env("CUDABOX_REGISTRY"),
                       self.push if self.push is not None else env("CUDABOX_PUSH", "") not in ("", "0"),
                       self.output_dir or env("CUDABOX_SLURM_OUTPUT_DIR"), self.image)


def slurm_options(**kw):
    """SlurmOptions from flag values (lists of --env and --sbatch-arg become tuples)."""
    from .slurm_run import SlurmOptions

    kw["env"] = tuple(kw.get("env") or ())
    kw["sbatch_args"] = tuple(kw.get("sbatch_args") or ())
    return SlurmOptions(**kw)


def k8s_manifest(project: Path, command: list[str], *, gpus: int, name=None, namespace=None, shm_size=None,
                 registry=None, image=None, lock=None) -> dict:
    """The batch/v1 Job of `export k8s` and `run --on k8s`."""
    from ..image.build import project_tag
    from ..lock.lockfile import read_lock
    from .k8s import job

    lock = lock or read_lock(project)
    ref = image or project_tag(lock, project_dir=project)
    if registry and not image:
        ref = f"{registry.rstrip('/')}/{ref}"
    return job(lock, image=ref, command=command, name=name, gpus=gpus, namespace=namespace,
               shm_size=shm_size)


def gpu_count(text, on: str) -> int | None:
    """On a cluster --gpus is a number per node (None: k8s's default of one)."""
    if text in (None, ""):
        return None if on == "k8s" else 0
    if text == "none":
        return 0
    if not str(text).isdigit():
        raise InputError(f"--gpus {text}: with --on {on}, --gpus is a number of GPUs per node")
    return int(text)


def _local(opts, cluster: Cluster) -> int:
    from .run import run

    return run(opts)


def _slurm(opts, cluster: Cluster) -> int:
    from .slurm_run import run

    c = cluster.from_env()
    sopts = slurm_options(partition=c.partition, gpus=gpu_count(opts.gpus, "slurm"), time=c.time, nodes=c.nodes,
                          transport=c.transport, runtime=c.runtime, shared_dir=c.shared_dir, registry=c.registry,
                          push=c.push, output_dir=c.output_dir, image=c.image, env=opts.env)
    return run(opts.project, list(opts.command), sopts, detach=opts.detach)


def _k8s(opts, cluster: Cluster) -> int:
    from .k8s_run import submit
    from .run import fresh_lock

    if opts.env:
        raise InputError("--env: not available with --on k8s (bake variables into cudabox.yaml's env:)")
    c = cluster.from_env()
    gpus = gpu_count(opts.gpus, "k8s")
    lock = fresh_lock(Path(opts.project))
    manifest = k8s_manifest(Path(opts.project), list(opts.command), gpus=1 if gpus is None else gpus,
                            name=opts.name, registry=c.registry, image=c.image, lock=lock)
    return submit(manifest, detach=opts.detach)


BACKENDS = {"local": _local, "slurm": _slurm, "k8s": _k8s}


def run(on: str, opts, cluster: Cluster | None = None) -> int:
    """Run the job where `on` says; returns its exit code (0 when detached)."""
    if on not in BACKENDS:
        raise InputError(f"--on {on}: expected {', '.join(BACKENDS)}")
    if on != "local":
        unsupported = [flag for flag, value in (("--publish", opts.ports), ("--volume", opts.volumes),
                                                ("--interactive", opts.interactive), ("--tty", opts.tty)) if value]
        if unsupported:
            raise InputError(f"{', '.join(unsupported)}: not available with --on {on}")
    return BACKENDS[on](opts, cluster or Cluster())
