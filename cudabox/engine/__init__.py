"""The one door to the container engine: what cudabox asks of one (interface.py), whatever implements it.

Everything else (build, validate, run, ps/logs/stop/exec, doctor, CI builds)
calls an `Engine` from `connect()` and speaks only the interface's types; no
other module imports an engine SDK or its errors. docker.py implements it for
the Docker Engine API (the SDK) plus a docker CLI for BuildKit builds. A second
engine (Podman's Docker-compatible socket, say) is another implementation of
`interface.Engine`, chosen here (docs/architecture.md says what was tried).
"""

from __future__ import annotations

from .interface import (
    STDERR,
    STDOUT,
    JOB_LABEL,
    BuildError,
    BuildRequest,
    Container,
    ContainerSpec,
    Engine,
    EngineError,
    GpuAccess,
    NoSuchContainer,
    RunResult,
)

__all__ = ["STDERR", "STDOUT", "JOB_LABEL", "BuildError", "BuildRequest", "Container", "ContainerSpec", "Engine", "EngineError",
           "GpuAccess", "NoSuchContainer", "RunResult", "connect", "context_files"]


def context_files(context, ignore: list[str], dockerfile: str) -> set[str]:
    """The files a build of `context` sends, under .dockerignore rules (Podman's builds read the same file)."""
    from .docker import context_files as files

    return files(context, ignore, dockerfile)


def connect(docker: str | None = None) -> Engine:
    """The engine this machine uses (exit 5 with what to do when none answers)."""
    from .docker import DockerEngine

    return DockerEngine.connect(docker)
