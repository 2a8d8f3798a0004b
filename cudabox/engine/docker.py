"""The one place that talks to a Docker engine (model: repo2docker's ContainerEngine).

Images, containers and the legacy builder go through the docker SDK. BuildKit
builds (cache mounts, build secrets) need a client session that the SDK
cannot open, so they go through a docker CLI: `docker buildx build`, or
`DOCKER_BUILDKIT=1 docker build` for a CLI older than 23.0 (BuildKit is built
into those; since 23.0 it needs the buildx plugin). Which CLI, and so which
builder, is decided once per process by probing (~20 ms per binary).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .buildlog import ERROR, BuildLog, Event, PlainParser, StreamParser
from ..errors import CheckFailed, EnvironmentProblem, InputError

DOCKER_ENV = "CUDABOX_DOCKER"  # the docker CLI to use (a path or a name on PATH)
BUILDER_ENV = "CUDABOX_BUILDER"  # force a builder: buildx | buildkit | legacy
BUILDX, BUILDKIT, LEGACY = "buildx", "buildkit", "legacy"
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "ftp_proxy",
              "no_proxy")  # Docker's predefined build args: used without being declared, kept out of history
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


@dataclass(frozen=True)
class Builder:
    kind: str  # buildx | buildkit | legacy
    docker: str | None = None  # the CLI (None: the SDK's legacy builder)
    why: str = ""
    local_images: bool = True  # can FROM name an image of the engine (not with a docker-container buildx)

    @property
    def buildkit(self) -> bool:
        return self.kind != LEGACY

    def describe(self) -> str:
        return {BUILDX: f"BuildKit ({self.docker} buildx build)",
                BUILDKIT: f"BuildKit (DOCKER_BUILDKIT=1 {self.docker} build)",
                LEGACY: "the legacy builder (Docker API)"}[self.kind]


def probe_cli(path: str) -> tuple[str | None, str, bool]:
    """What a docker CLI can build with: (buildx | buildkit | None, why, FROM sees local images)."""
    def run(*args):
        try:
            return subprocess.run([path, *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(args, 127, "", str(exc))

    bx = run("buildx", "version")
    if bx.returncode == 0:
        driver = re.search(r"^Driver:\s*(\S+)", run("buildx", "inspect").stdout, re.M)
        local = driver is None or driver.group(1) == "docker"
        return BUILDX, f"{path} has buildx ({bx.stdout.strip()[:60]})", local
    version = re.search(r"version (\d+)\.(\d+)\S*", run("--version").stdout)
    if not version:
        return None, f"{path} is not a docker CLI (`--version` did not say)", False
    text = version.group(0).split()[1].rstrip(",")
    if int(version.group(1)) < 23:
        return BUILDKIT, f"{path} is Docker {text}: BuildKit built in (DOCKER_BUILDKIT=1)", True
    return None, f"{path} is Docker {text} without buildx (since 23.0 BuildKit needs the buildx plugin)", False


def docker_candidates(path_env: str | None = None) -> list[str]:
    """Every `docker` on PATH, in order (like `which -a`), each real binary once."""
    seen, out = set(), []
    for directory in (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep):
        candidate = os.path.join(directory or ".", "docker")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            real = os.path.realpath(candidate)
            if real not in seen:
                seen.add(real)
                out.append(candidate)
    return out


def choose_builder(docker: str | None = None, *, env=None, probe=probe_cli, candidates=None) -> Builder:
    """The builder: the configured CLI (--docker, CUDABOX_DOCKER) or the first on PATH that can BuildKit;
    without one, the SDK's legacy builder. CUDABOX_BUILDER forces a kind (tests, troubleshooting)."""
    env = os.environ if env is None else env
    forced = env.get(BUILDER_ENV) or None
    if forced not in (None, BUILDX, BUILDKIT, LEGACY):
        raise InputError(f"{BUILDER_ENV}={forced}: expected {BUILDX}, {BUILDKIT} or {LEGACY}")
    if forced == LEGACY:
        return Builder(LEGACY, None, f"{BUILDER_ENV}=legacy")
    configured = docker or env.get(DOCKER_ENV) or None
    if configured:
        path = shutil.which(configured)
        if path is None:
            source = "--docker" if docker else DOCKER_ENV
            raise InputError(f"{source} {configured}: no such executable")
        tried = [path]
    else:
        tried = docker_candidates() if candidates is None else list(candidates)
    notes = []
    for path in tried:
        kind, why, local = probe(path)
        if kind and forced in (None, kind, BUILDKIT):
            # a buildx CLI can also do DOCKER_BUILDKIT=1 docker build (it is buildx underneath)
            return Builder(forced or kind, path, why, local)
        notes.append(why)
    if forced:
        tried_text = "; ".join(notes) or "none on PATH"
        raise EnvironmentProblem(f"{BUILDER_ENV}={forced}: no docker CLI can do it ({tried_text})")
    reason = "; ".join(notes) if notes else "no docker CLI on PATH"
    return Builder(LEGACY, None, f"no docker CLI with BuildKit ({reason}): the legacy builder "
                                 "through the Docker API (no cache mounts, no build secrets)")


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


@dataclass(frozen=True)
class GpuAccess:
    request: object | None  # a docker.types.DeviceRequest, or None: no GPU for containers
    how: str = ""
    reason: str = ""  # why there is none

    @property
    def available(self) -> bool:
        return self.request is not None


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str


def _unreachable(exc) -> EnvironmentProblem:
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    text = str(exc)
    if "Permission denied" in text or "PermissionError" in text:
        return EnvironmentProblem(f"no permission to use the Docker engine at {where}",
                                  hint="add your user to the `docker` group (then log in again), or use sudo")
    return EnvironmentProblem(f"no Docker engine answers at {where}",
                              hint="start it (`sudo systemctl start docker`, or `make services` in a cudabox "
                                   "checkout) or point DOCKER_HOST at one")


class Engine:
    """A connected engine plus the builder to use with it."""

    def __init__(self, client, docker: str | None = None):
        self.client = client
        self._docker = docker
        self._builder: Builder | None = None

    @classmethod
    def connect(cls, docker: str | None = None) -> "Engine":
        import docker as sdk

        try:
            client = sdk.from_env(timeout=int(os.environ.get("CUDABOX_DOCKER_TIMEOUT", "600")))
            client.ping()
        except Exception as exc:  # noqa: BLE001 - DockerException, requests' errors, OSError: all mean "no engine"
            raise _unreachable(exc) from None
        return cls(client, docker)

    @property
    def builder(self) -> Builder:
        if self._builder is None:
            self._builder = choose_builder(self._docker)
        return self._builder

    def native_platform(self) -> str:
        info = self.client.info()
        return f"{info.get('OSType', 'linux')}/{_ARCH.get(info.get('Architecture', ''), info.get('Architecture'))}"

    # ----------------------------------------------------------------- images

    def image(self, ref: str) -> dict | None:
        """`docker image inspect REF`, or None when there is no such image."""
        import docker as sdk

        try:
            return self.client.api.inspect_image(ref)
        except sdk.errors.ImageNotFound:
            return None
        except sdk.errors.APIError as exc:
            if exc.status_code in (400, 404):  # an invalid reference names no image either
                return None
            raise

    def tag(self, image_id: str, ref: str) -> None:
        repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
        self.client.api.tag(image_id, repo, tag, force=True)

    def remove_image(self, ref: str) -> bool:
        """Remove an image if nothing uses it (no other tag, container or child); False when it stays."""
        import docker as sdk

        try:
            self.client.api.remove_image(ref, noprune=False)
            return True
        except sdk.errors.APIError:
            return False

    def push(self, ref: str, on_line: Callable[[str], None] | None = None) -> None:
        repo, _, tag = ref.rpartition(":")
        try:
            for chunk in self.client.api.push(repo, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    raise CheckFailed(f"push of {ref} failed: {str(chunk['error']).strip()}")
                if on_line and chunk.get("status"):
                    on_line(" ".join(str(chunk[k]) for k in ("id", "status", "progress") if chunk.get(k)))
        except CheckFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK raises several types for a registry it can't reach
            raise CheckFailed(f"push of {ref} failed: {exc}") from None

    def images(self) -> list[dict]:
        """cudabox's images: labelled with a stack hash, or in the cudabox/ namespace."""
        found = {}
        for kwargs in ({"filters": {"label": "io.cudabox.stack.hash"}}, {"name": "cudabox/*"}):
            for image in self.client.api.images(**kwargs):
                found[image["Id"]] = image
        return list(found.values())

    # ----------------------------------------------------------------- builds

    def build(self, req: BuildRequest, on_event: Callable[[Event], None],
              on_line: Callable[[str], None] | None = None) -> str:
        """Build `req.target`; returns the image ID. Tags nothing (the caller tags on success).
        Raises BuildError with the log when the build fails."""
        log = BuildLog()

        def emit(events):
            for event in events:
                log.add(event)
                on_event(event)

        if self.builder.buildkit:
            return self._build_cli(req, emit, on_line, log)
        return self._build_sdk(req, emit, on_line, log)

    def _build_cli(self, req, emit, on_line, log) -> str:
        b = self.builder
        fd, iidfile = tempfile.mkstemp(prefix="cudabox-iid-")
        os.close(fd)
        args = [b.docker] + (["buildx", "build", "--load"] if b.kind == BUILDX else ["build"])
        args += ["--progress=plain", "-f", str(req.context / req.dockerfile), "--target", req.target,
                 "--iidfile", iidfile]
        args += ["--no-cache"] if req.no_cache else []
        args += ["--platform", req.platform] if req.platform else []
        for ident, path in sorted(req.secrets.items()):
            args += ["--secret", f"id={ident},src={path}"]
        for key, value in sorted(req.labels.items()):
            args += ["--label", f"{key}={value}"]
        for name in PROXY_ARGS:
            if os.environ.get(name):
                args += ["--build-arg", name]  # the value comes from the environment, never the command line
        args.append(str(req.context))
        env = dict(os.environ, DOCKER_BUILDKIT="1")
        parser = PlainParser()
        try:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                                    errors="replace", bufsize=1)
        except OSError as exc:
            Path(iidfile).unlink(missing_ok=True)
            emit([Event(ERROR, text=f"cannot run {b.docker}: {exc.strerror or exc}")])
            raise BuildError(log) from None
        try:
            for raw in proc.stdout:
                if on_line:
                    on_line(raw)
                emit(parser.feed(raw))
            code = proc.wait()
            try:  # the CLI deletes the file first, and writes it only on success
                image_id = Path(iidfile).read_text().strip() or parser.image_id
            except OSError:
                image_id = parser.image_id
        finally:
            if proc.poll() is None:  # interrupted: stop the CLI, which cancels the build
                proc.terminate()
                proc.wait(timeout=30)
            Path(iidfile).unlink(missing_ok=True)
        if code != 0 or not image_id:
            raise BuildError(log)
        return image_id

    def _build_sdk(self, req, emit, on_line, log) -> str:
        import docker as sdk
        from docker.utils.build import tar

        parser = StreamParser()
        context = tar(str(req.context), exclude=req.ignore, dockerfile=(req.dockerfile, None))
        try:
            stream = self.client.api.build(
                fileobj=context, custom_context=True, dockerfile=req.dockerfile, target=req.target,
                nocache=req.no_cache, rm=True, forcerm=True, decode=True, labels=req.labels or None,
                platform=req.platform, buildargs={n: os.environ[n] for n in PROXY_ARGS if os.environ.get(n)} or None)
            for chunk in stream:
                if on_line:
                    for key in ("stream", "status", "error"):
                        if chunk.get(key):
                            on_line(str(chunk[key]))
                emit(parser.feed(chunk))
            emit(parser.close())
        except sdk.errors.APIError as exc:  # refused before the stream started (a bad platform, target...)
            emit([Event(ERROR, text=str(exc.explanation or exc))])
            raise BuildError(log) from None
        finally:
            context.close()
        if parser.failed or not parser.image_id:
            raise BuildError(log)
        return parser.image_id

    # ----------------------------------------------------------------- containers

    def gpu_access(self) -> GpuAccess:
        """How containers get GPUs here: the engine's nvidia runtime, a CDI spec, or the toolkit's hook;
        otherwise none, and why (said in one line, with what to install)."""
        from docker.types import DeviceRequest

        info = self.client.info()
        runtimes = sorted((info.get("Runtimes") or {}).keys())
        if "nvidia" in runtimes:
            return GpuAccess(DeviceRequest(count=-1, capabilities=[["gpu"]]),
                             "the engine's nvidia runtime (--gpus all)")
        local = os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")
        if "CDISpecDirs" in info and local:  # engines that read CDI specs (25+) say where
            for directory in info.get("CDISpecDirs") or CDI_DIRS:
                for spec in sorted(Path(directory).glob("*")) if Path(directory).is_dir() else []:
                    if spec.suffix in (".json", ".yaml", ".yml") and "nvidia.com/gpu" in _read(spec):
                        return GpuAccess(DeviceRequest(driver="cdi", device_ids=["nvidia.com/gpu=all"]),
                                         f"CDI ({spec})")
        if local and shutil.which("nvidia-container-runtime-hook"):
            return GpuAccess(DeviceRequest(count=-1, capabilities=[["gpu"]]),
                             "the NVIDIA container toolkit's hook (--gpus all)")
        listed = ", ".join(runtimes) or "-"
        return GpuAccess(None, reason=f"the Docker engine has no NVIDIA runtime (runtimes: {listed}; "
                                      "no CDI spec for nvidia.com/gpu): install the NVIDIA Container Toolkit for the "
                                      "GPU checks")

    def run(self, image: str, command: list[str], *, gpus: GpuAccess | None = None, timeout: float = 900,
            environment: dict | None = None) -> RunResult:
        """Run a command to completion and return its exit code and output. The container is created,
        started and always removed here (the SDK's remove=True leaves a Created container when start fails)."""
        import docker as sdk

        kwargs = {"device_requests": [gpus.request]} if gpus and gpus.available else {}
        container = self.client.containers.create(image, command, detach=True, environment=environment, **kwargs)
        try:
            container.start()
            try:
                status = container.wait(timeout=timeout)
            except Exception:  # noqa: BLE001 - requests' ReadTimeout/ConnectionError
                raise CheckFailed(f"{image}: `{' '.join(command)}` did not finish within {timeout:.0f}s") from None
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
            return RunResult(int(status.get("StatusCode", 1)), out, err)
        finally:
            try:
                container.remove(force=True)
            except sdk.errors.APIError:
                pass


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
