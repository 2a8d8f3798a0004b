"""`cudabox doctor`: can this machine build and run the project's stack? One line per fact, a fix for each.

Essential (a failure exits 1): the Docker engine answers; on a host with
NVIDIA GPUs, the engine can hand them to containers; the project's lock can
run on this host's driver. Warnings (exit 0): no BuildKit builder (builds
fall back to the legacy builder: no caches, no build secrets), no GPU or
driver (CI machines, laptops: jobs run without a GPU), no GPU support in the
engine on a machine without GPUs, a stale lock, an image not built yet. The node's last
`cudabox check` is shown too (kept in the state dir); a failed one fails here.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
TOOLKIT_FIX = ("install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker` "
               "and restart dockerd (without it: 'could not select device driver \"\" with capabilities: [[gpu]]')")


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str | None = None


def _engine(checks: list[Check]):
    from ..engine import connect
    from ..errors import EnvironmentProblem

    try:
        eng = connect()
        described = eng.describe()
    except EnvironmentProblem as exc:
        checks.append(Check("engine", FAIL, exc.message, exc.hint))
        return None
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    checks.append(Check("engine", OK, f"{described} at {where}"))
    return eng


def _builder(checks: list[Check], eng) -> None:
    from ..errors import CudaboxError

    try:
        b = eng.builder
    except CudaboxError as exc:
        checks.append(Check("buildkit", FAIL, str(exc), "unset CUDABOX_BUILDER / CUDABOX_DOCKER or fix the path"))
        return
    if b.buildkit:
        checks.append(Check("buildkit", OK, f"{b.describe()}: {b.why}"))
    else:
        checks.append(Check("buildkit", WARN, f"{b.describe()}: {b.why}",
                            "install the docker buildx plugin (or a docker CLI < 23, which has BuildKit built in); "
                            "point CUDABOX_DOCKER at it. Needed for ca_cert/index secrets and build caches"))


def _gpu_runtime(checks: list[Check], eng, host) -> None:
    if eng is None:
        checks.append(Check("gpu-runtime", SKIP, "no engine to ask"))
        return
    access = eng.gpu_access()
    if access.available:
        checks.append(Check("gpu-runtime", OK, f"containers get GPUs through {access.how}"))
    elif host.gpus or host.driver:
        checks.append(Check("gpu-runtime", FAIL, f"this host has NVIDIA GPUs but {access.reason}", TOOLKIT_FIX))
    else:
        checks.append(Check("gpu-runtime", WARN, f"{access.reason} (fine without GPUs: jobs run with --gpus none)",
                            TOOLKIT_FIX + " (on GPU machines)"))


def _host(checks: list[Check], host) -> None:
    if host.ignored:
        checks.append(Check("driver", SKIP, "host ignored (CUDABOX_NO_HOST / --no-host)"))
    elif host.driver and host.gpus:
        checks.append(Check("driver", OK, host.describe()))
    elif host.driver:
        checks.append(Check("driver", WARN, f"driver {host.driver} but no GPU visible ({host.source})",
                            "check `nvidia-smi`; a GPU may be unbound or in use by a VM"))
    else:
        checks.append(Check("driver", WARN, "no NVIDIA driver or GPU: jobs run without a GPU and `cudabox "
                                            "validate` reports passed-without-gpu",
                            "on a GPU machine, install the NVIDIA driver (then `nvidia-smi` works)"))


def _project(checks: list[Check], project: Path, host, eng) -> None:
    from ..errors import CudaboxError
    from ..lock.lockfile import LOCK_FILE, read_lock
    from ..project.spec import load_spec

    if not (project / LOCK_FILE).exists():
        checks.append(Check("project", SKIP, f"no {LOCK_FILE} in {project} (`cudabox init` writes one)"))
        return
    try:
        lock = read_lock(project)
        stale = load_spec(project).inputs_hash != lock.inputs_hash
    except CudaboxError as exc:
        checks.append(Check("project", FAIL, str(exc), "fix the file, then `cudabox lock`"))
        return
    stack = lock.stack
    what = f"{lock.project.name}: CUDA {stack.cuda} needs a driver >= {stack.min_driver or '?'} ({stack.requirement})"
    if stale:
        checks.append(Check("lock", WARN, "cudabox.yaml changed since cudabox.lock was written",
                            "`cudabox lock` (cudabox run re-locks by itself)"))
    if host.driver:
        from .run import driver_problem

        problem = driver_problem(stack, host.driver)
        checks.append(Check("project", FAIL if problem else OK, problem or f"{what}: driver {host.driver} runs it",
                            "upgrade the driver, or set `driver:` in cudabox.yaml and re-lock" if problem else None))
    else:
        checks.append(Check("project", WARN, f"{what}; no driver here: it runs, without a GPU",
                            "run it on a machine with such a driver for GPU work"))
    if eng is not None:
        from ..image.build import project_tag

        tag = project_tag(lock, project_dir=project)
        if eng.image(tag):
            checks.append(Check("image", OK, f"{tag} is built"))
        else:
            checks.append(Check("image", WARN, f"{tag} is not built yet", "`cudabox build` (or `cudabox run` builds it)"))


def _node_check(checks: list[Check], host) -> None:
    """The last `cudabox check` of this node (docs/check.md), from the state dir."""
    from .noderesults import load_results, node_name, summary

    node = node_name()
    last = load_results().get(node)
    if last is None:
        checks.append(Check("node-check", SKIP, f"{node} was never checked", "`cudabox check` (seconds with --level 1)"))
    elif last.get("status") == "failed":
        checks.append(Check("node-check", FAIL, f"{node}: {summary(last)}",
                            "see `cudabox check` for the details; docs/check.md says what each failure means"))
    elif last.get("status") == "passed-without-gpu" and host.gpus:
        checks.append(Check("node-check", WARN, f"{node}: {summary(last)}; nothing ran on the GPU "
                                                f"({last.get('gpu_reason')})", "`cudabox check` on this GPU node"))
    else:
        checks.append(Check("node-check", OK, f"{node}: {summary(last)}"))


def diagnose(project: Path = Path("."), *, no_host: bool = False) -> list[Check]:
    from .. import host as host_mod

    checks: list[Check] = []
    eng = _engine(checks)
    if eng is not None:
        _builder(checks, eng)
    host = host_mod.detect(ignore=no_host)
    _gpu_runtime(checks, eng, host)
    _host(checks, host)
    _node_check(checks, host)
    _project(checks, Path(project), host, eng)
    return checks


def report(checks: list[Check]) -> dict:
    return {"ok": not any(c.status == FAIL for c in checks), "checks": [asdict(c) for c in checks]}
