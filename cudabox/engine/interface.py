"""What cudabox asks of a container engine, whatever implements it (see the package docstring).

Everything else (build, validate, run, ps/logs/stop/exec, doctor, CI builds)
calls an `Engine` from `connect()` and speaks only the types below; no other
module imports an engine SDK or its errors. docker.py implements it for the
Docker Engine API (the SDK) plus a docker CLI for BuildKit builds. A second
engine — Podman's Docker-compatible socket, say — is another implementation
of this Protocol, chosen in `connect()` (docs/architecture.md: what was tried).

Image records (`image()`, `images()`) keep the Engine API's inspect shape
(`Id`, `Size`, `Config.Env`, `Config.Labels`), which Podman's compatible API
serves too; containers come back as `Container`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

if TYPE_CHECKING:  # a job never builds: the build log's types are imported by what builds
    from .buildlog import BuildLog, Event

STDOUT, STDERR = 1, 2  # stream ids of Attachment.frames() and Engine.logs()
JOB_LABEL = "io.cudabox.run"  # every container cudabox starts carries it: `cudabox ps`/`stop` filter on it


@dataclass
class BuildRequest:
    context: Path
    dockerfile: str  # relative to the context
    target: str
    ignore: list[str] = field(default_factory=list)  # .dockerignore patterns (the CLI reads them from a file)
    secrets: dict[str, str] = field(default_factory=dict)  # id -> file (BuildKit only)
    labels: dict[str, str] = field(default_factory=dict)
    no_cache: bool = False
    platform: str | None = None


class BuildError(Exception):
    """A build that failed; `log` holds the steps and the output needed to say where and why."""

    def __init__(self, log: BuildLog):
        super().__init__("build failed")
        self.log = log


class EngineError(Exception):
    """The engine refused a request; `explanation` is what it said."""

    def __init__(self, explanation: str, status: int | None = None):
        super().__init__(explanation)
        self.explanation, self.status = explanation, status


class NoSuchContainer(EngineError):
    pass


@dataclass(frozen=True)
class GpuAccess:
    kind: str | None  # how this engine hands out GPUs: "gpus" (--gpus style) | "cdi" | None: none
    how: str = ""
    reason: str = ""  # why there is none

    @property
    def available(self) -> bool:
        return self.kind is not None


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str


@dataclass
class ContainerSpec:
    """One container to create, in engine-neutral terms (each implementation maps them)."""

    image: str
    command: list[str] | None = None
    user: str | None = None  # "uid:gid"
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    tty: bool = False
    stdin: bool = False
    binds: list[str] = field(default_factory=list)  # "SRC:DST:MODE"
    ports: dict = field(default_factory=dict)  # "8888/tcp" -> host port | (ip, port) | a list of them
    gpus: tuple[str, ...] = ()  # ("all",) or device indexes/UUIDs; () = no GPU
    ipc: str | None = None
    shm_size: str | None = None
    ulimits: tuple[tuple[str, int, int], ...] = ()  # (name, soft, hard)
    tmpfs: dict[str, str] = field(default_factory=dict)  # path -> mount options
    init: bool = True


@dataclass(frozen=True)
class Container:
    id: str
    name: str
    labels: dict
    tty: bool = False
    running: bool = False
    status: str = ""  # the engine's words: "Up 3 minutes", "exited"
    state: str = ""  # running | exited | created ...
    image: str = ""
    command: str = ""
    created: int | None = None


class Attachment(Protocol):
    """A running container's (or exec's) streams."""

    def frames(self) -> Iterator[tuple[int, bytes]]: ...  # (STDOUT | STDERR, data) until it ends
    def send(self, data: bytes) -> None: ...
    def close_input(self) -> None: ...


class Engine(Protocol):
    builder: object  # .buildkit, .why, .describe(): which builder `build` uses

    # the engine
    def describe(self) -> str: ...  # "Docker Engine 28.2.2 (API 1.50)"
    def native_platform(self) -> str: ...  # linux/amd64
    def gpu_access(self) -> GpuAccess: ...

    # images
    def image(self, ref: str) -> dict | None: ...
    def images(self) -> list[dict]: ...
    def tag(self, image_id: str, ref: str) -> None: ...
    def remove_image(self, ref: str) -> bool: ...
    def push(self, ref: str, on_line: Callable[[str], None] | None = None) -> None: ...
    def save(self, ref: str, path: Path) -> None: ...  # an image archive (`docker save`) for other hosts
    def build(self, req: BuildRequest, on_event: Callable[[Event], None],
              on_line: Callable[[str], None] | None = None) -> str: ...
    def cancel_builds(self) -> None: ...  # stop the builds running in other threads (on a signal)

    # disk (images ls / prune)
    def image_chains(self) -> dict[str, tuple[int, tuple[str, ...]]]: ...  # every image: id -> (size, layers)
    def image_users(self) -> dict[str, int]: ...  # image id -> containers (any state) made from it
    def build_cache(self, *, prune: bool = False) -> int: ...  # bytes no build uses; prune: drop them

    # one-shot commands (validate)
    def run(self, image: str, command: list[str], *, gpus: GpuAccess | None = None, timeout: float = 900,
            environment: dict | None = None, labels: dict | None = None) -> RunResult: ...

    # containers (run, ps, logs, stop, exec)
    def create(self, spec: ContainerSpec, gpus: GpuAccess | None = None) -> str: ...
    def start(self, cid: str) -> None: ...
    def attach(self, cid: str, *, stdin: bool, tty: bool) -> Attachment: ...
    def wait(self, cid: str) -> int: ...
    def kill(self, cid: str, signal: str) -> None: ...
    def resize(self, cid: str, height: int, width: int) -> None: ...
    def remove(self, cid: str) -> None: ...
    def stop(self, cid: str, timeout: int = 10) -> None: ...
    def inspect(self, name: str) -> Container | None: ...
    def containers(self, label: str, *, all_: bool = False) -> list[Container]: ...
    def logs(self, cid: str, *, follow: bool = False, tail: str = "all") -> Iterator[tuple[int, bytes]]: ...
    def exec(self, cid: str, command: list[str], *, stdin: bool, tty: bool,
             env: dict | None = None) -> tuple[Attachment, Callable[..., None], Callable[[], int | None]]: ...
