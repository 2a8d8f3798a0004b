"""The Docker implementation of engine.interface.Engine (model: repo2docker's ContainerEngine).

Images, containers and the legacy builder go through the docker SDK. BuildKit
builds (cache mounts, build secrets) need a client session that the SDK
cannot open, so they go through a docker CLI: `docker buildx build`, or
`DOCKER_BUILDKIT=1 docker build` for a CLI older than 23.0 (BuildKit is built
into those; since 23.0 it needs the buildx plugin). Which CLI, and so which
builder, is decided once per process by probing (~20 ms per binary).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import quote

from ..errors import CheckFailed, EnvironmentProblem, InputError
from .api import DEFAULT, Attachment, UnixAPI, client_config, container_body, decode, device_requests, proxy_env
from .interface import (
    STDERR,
    STDOUT,
    JOB_LABEL,
    BuildError,
    BuildRequest,
    Container,
    ContainerSpec,
    EngineError,
    GpuAccess,
    NoSuchContainer,
    RunResult,
)

if TYPE_CHECKING:
    from .buildlog import Event

__all__ = ["DockerEngine", "device_requests"]  # device_requests: the API's form, from api.py

CONNECT_TIMEOUT_ENV = "CUDABOX_CONNECT_TIMEOUT"  # seconds the engine has to answer the first call (ping)
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


def _stop_child(proc: subprocess.Popen) -> None:
    """Stop a builder child the way Ctrl-C would (the docker CLI cancels its build on SIGINT), then harder;
    bounded, and itself not cut short by a second signal (the child must not outlive cudabox)."""
    import signal

    for how, wait in ((lambda: proc.send_signal(signal.SIGINT), 15), (proc.terminate, 10), (proc.kill, 10)):
        try:
            how()
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # another signal while waiting: go on stopping it, harder
            continue
        except OSError:
            return


def _seconds(env: str, default: float) -> float:
    try:
        value = float(os.environ.get(env) or default)
    except ValueError:
        raise InputError(f"{env}={os.environ[env]!r}: expected a number of seconds") from None
    return value if value > 0 else default


def _unreachable(exc, timeout: float | None = None) -> EnvironmentProblem:
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    text = str(exc)
    if timeout is not None and re.search(r"(?i)timed? ?out", f"{type(exc).__name__} {text}"):
        return EnvironmentProblem(f"the Docker engine at {where} accepts connections but did not answer within "
                                  f"{timeout:g}s", hint=f"restart it, or allow more time with {CONNECT_TIMEOUT_ENV}")
    if "Permission denied" in text or "PermissionError" in text:
        return EnvironmentProblem(f"no permission to use the Docker engine at {where}",
                                  hint="add your user to the `docker` group (then log in again), or use sudo")
    return EnvironmentProblem(f"no Docker engine answers at {where}",
                              hint="start it (`sudo systemctl start docker`, or `make services` in a cudabox "
                                   "checkout) or point DOCKER_HOST at one")


def context_files(context: Path, ignore: list[str], dockerfile: str) -> set[str]:
    """The files of `context` a build sends under .dockerignore patterns (the SDK's matcher)."""
    from docker.utils.build import exclude_paths

    return exclude_paths(str(context), list(ignore), dockerfile=dockerfile)


def _engine_error(exc) -> EngineError:
    import docker as sdk

    kind = NoSuchContainer if isinstance(exc, sdk.errors.NotFound) else EngineError
    return kind(str(getattr(exc, "explanation", None) or exc), getattr(exc, "status_code", None))


class SdkAPI:
    """api.py's requests through the docker SDK's session: engines behind tcp://, ssh:// or TLS."""

    def __init__(self, client):
        self.client = client
        self.version, self.base_url = client.api.api_version, client.api.base_url

    @property
    def timeout(self):
        return self.client.api.timeout

    @timeout.setter
    def timeout(self, value):
        self.client.api.timeout = value

    def call(self, method: str, path: str, *, params=None, body=None, timeout=DEFAULT, versioned=True):
        api = self.client.api
        url = f"{api.base_url}/v{api.api_version}{path}" if versioned else f"{api.base_url}{path}"
        kwargs = {"params": {k: v for k, v in (params or {}).items() if v is not None},
                  "timeout": api.timeout if timeout is DEFAULT else timeout}
        if body is not None:
            kwargs.update(data=json.dumps(body), headers={"Content-Type": "application/json"})
        try:
            res = api.request(method, url, **kwargs)
        except Exception as exc:  # noqa: BLE001 - requests' connection errors and timeouts
            raise EngineError(f"the engine did not answer: {exc}") from None
        return decode(res.status_code, res.content)

    def attach(self, cid: str, params: dict, tty: bool) -> "Attachment":
        import docker as sdk

        try:
            sock = self.client.api.attach_socket(cid, params=params)
        except sdk.errors.APIError as exc:
            raise _engine_error(exc) from None
        return Attachment(sock, tty=tty)


class DockerEngine:
    """A connected Docker engine plus the builder to use with it.

    Jobs' calls (containers, image inspect, info) are requests of api.py: over the Unix socket without the
    SDK for a local engine. Builds, push/save, disk reports, logs, exec and validate's one-shot containers
    use the SDK's client, made when first needed."""

    def __init__(self, api, docker: str | None = None):
        import threading

        self.api = api  # api.UnixAPI or api.SdkAPI
        self._client = api.client if isinstance(api, SdkAPI) else None
        self._config: dict | None = None
        self._docker = docker
        self._builder: Builder | None = None
        self._children: set = set()  # running builder CLIs (builds in worker threads: ci build)
        self._children_lock = threading.Lock()

    @property
    def client(self):
        """The docker SDK's client for this engine (imported on first use: ~70 ms)."""
        if self._client is None:
            import docker as sdk

            self._client = sdk.DockerClient(base_url=f"unix://{self.api.path}", version=self.api.version,
                                            timeout=self.api.timeout)
        return self._client

    def _client_config(self) -> dict:
        if self._config is None:
            self._config = client_config()
        return self._config

    def cancel_builds(self) -> None:
        """Stop every build this engine object runs, from any thread (a signal reaches only the main one)."""
        with self._children_lock:
            children = list(self._children)
        for proc in children:
            if proc.poll() is None:
                _stop_child(proc)

    @classmethod
    def connect(cls, docker: str | None = None) -> "DockerEngine":
        # The first exchange (ping, the API version) gets a short timeout: an engine that accepts
        # connections and never answers is "no engine" in seconds. Later calls (builds, waits) get the long one.
        connect_timeout = _seconds(CONNECT_TIMEOUT_ENV, 10)
        host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        try:
            if host.startswith("unix://"):
                api = UnixAPI(host[len("unix://"):], connect_timeout)
                api.ping()
            else:  # tcp://, ssh://, TLS: the SDK's transports
                import docker as sdk

                client = sdk.from_env(timeout=connect_timeout)
                client.ping()
                api = SdkAPI(client)
        except Exception as exc:  # noqa: BLE001 - OSError, EngineError, the SDK's errors: all mean "no engine"
            raise _unreachable(exc, connect_timeout) from None
        api.timeout = _seconds("CUDABOX_DOCKER_TIMEOUT", 600)
        return cls(api, docker)

    @property
    def builder(self) -> Builder:
        if self._builder is None:
            self._builder = choose_builder(self._docker)
        return self._builder

    def describe(self) -> str:
        """"Docker Engine 28.2.2 (API 1.50)"; Podman's compatible socket names itself "Podman Engine"."""
        version = self.api.call("GET", "/version")
        name = ((version.get("Components") or [{}])[0].get("Name") or "Engine").strip()
        name = name if name != "Engine" else "Docker Engine"
        return f"{name} {version.get('Version')} (API {version.get('ApiVersion')})"

    def native_platform(self) -> str:
        info = self.api.call("GET", "/info")
        return f"{info.get('OSType', 'linux')}/{_ARCH.get(info.get('Architecture', ''), info.get('Architecture'))}"

    # ----------------------------------------------------------------- images

    def image(self, ref: str) -> dict | None:
        """`docker image inspect REF`, or None when there is no such image."""
        try:
            return self.api.call("GET", f"/images/{quote(ref, safe='/:')}/json")
        except EngineError as exc:
            if exc.status in (400, 404):  # an invalid reference names no image either
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

    def save(self, ref: str, path: Path) -> None:
        """`docker save REF -o PATH` through the API."""
        import docker as sdk

        try:
            with open(path, "wb") as fh:
                for chunk in self.client.api.get_image(ref):
                    fh.write(chunk)
        except sdk.errors.APIError as exc:
            raise _engine_error(exc) from None

    def images(self) -> list[dict]:
        """cudabox's images: labelled with a stack hash, or in the cudabox/ namespace."""
        found = {}
        for kwargs in ({"filters": {"label": "io.cudabox.stack.hash"}}, {"name": "cudabox/*"}):
            for image in self.client.api.images(**kwargs):
                found[image["Id"]] = image
        return list(found.values())

    # ----------------------------------------------------------------- disk

    def image_chains(self) -> dict[str, tuple[int, tuple[str, ...]]]:
        """Every image of the engine (not only cudabox's): its size and its layers' diff IDs, bottom first."""
        out = {}
        for summary in self.client.api.images():
            info = self.image(summary["Id"])
            if info is not None:  # removed meanwhile
                out[info["Id"]] = (int(info.get("Size") or 0), tuple((info.get("RootFS") or {}).get("Layers") or ()))
        return out

    def image_users(self) -> dict[str, int]:
        users: dict[str, int] = {}
        for c in self.client.api.containers(all=True):
            users[c.get("ImageID", "")] = users.get(c.get("ImageID", ""), 0) + 1
        return users

    def build_cache(self, *, prune: bool = False) -> int:
        """Build cache no build uses now (`docker system df`); with prune, `docker builder prune` it."""
        if prune:
            return int(self.client.api.prune_builds().get("SpaceReclaimed") or 0)
        records = self.client.api.df().get("BuildCache") or ()
        return sum(int(r.get("Size") or 0) for r in records if not r.get("InUse"))

    # ----------------------------------------------------------------- builds

    def build(self, req: BuildRequest, on_event: Callable[["Event"], None],
              on_line: Callable[[str], None] | None = None) -> str:
        """Build `req.target`; returns the image ID. Tags nothing (the caller tags on success).
        Raises BuildError with the log when the build fails."""
        from .buildlog import BuildLog  # builds only: a job's calls don't read build logs

        log = BuildLog()

        def emit(events):
            for event in events:
                log.add(event)
                on_event(event)

        if self.builder.buildkit:
            return self._build_cli(req, emit, on_line, log)
        return self._build_sdk(req, emit, on_line, log)

    def _build_cli(self, req, emit, on_line, log) -> str:
        from .buildlog import ERROR, Event, PlainParser

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
        with self._children_lock:
            self._children.add(proc)
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
            if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM, SIGHUP): stop the CLI, which cancels the build
                _stop_child(proc)
            with self._children_lock:
                self._children.discard(proc)
            Path(iidfile).unlink(missing_ok=True)
        if code != 0 or not image_id:
            raise BuildError(log)
        return image_id

    def _build_sdk(self, req, emit, on_line, log) -> str:
        import docker as sdk
        from docker.utils.build import tar

        from .buildlog import ERROR, Event, StreamParser

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
        info = self.api.call("GET", "/info")
        runtimes = sorted((info.get("Runtimes") or {}).keys())
        if "nvidia" in runtimes:
            return GpuAccess("gpus", "the engine's nvidia runtime (--gpus all)")
        local = os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")
        if "CDISpecDirs" in info and local:  # engines that read CDI specs (25+) say where
            for directory in info.get("CDISpecDirs") or CDI_DIRS:
                for spec in sorted(Path(directory).glob("*")) if Path(directory).is_dir() else []:
                    if spec.suffix in (".json", ".yaml", ".yml") and "nvidia.com/gpu" in _read(spec):
                        return GpuAccess("cdi", f"CDI ({spec})")
        if local and shutil.which("nvidia-container-runtime-hook"):
            return GpuAccess("gpus", "the NVIDIA container toolkit's hook (--gpus all)")
        listed = ", ".join(runtimes) or "-"
        return GpuAccess(None, reason=f"the Docker engine has no NVIDIA runtime (runtimes: {listed}; "
                                      "no CDI spec for nvidia.com/gpu): install the NVIDIA Container Toolkit for the "
                                      "GPU checks")

    def run(self, image: str, command: list[str], *, gpus: GpuAccess | None = None, timeout: float = 900,
            environment: dict | None = None, labels: dict | None = None) -> RunResult:
        """Run a command to completion and return its exit code and output. The container is created,
        started and always removed here (the SDK's remove=True leaves a Created container when start fails),
        also when a signal interrupts any step: it has a name of ours from the start, so even a create that
        was cut short is found and removed. It carries JOB_LABEL, so `cudabox ps`/`stop` see it meanwhile."""
        import secrets as random

        import docker as sdk

        kwargs = {"device_requests": device_requests(("all",), gpus)} if gpus and gpus.available else {}
        name = f"cudabox-oneshot-{random.token_hex(6)}"
        container = None
        try:
            try:
                container = self.client.containers.create(image, command, detach=True, environment=environment,
                                                          name=name, labels={JOB_LABEL: "1", **(labels or {})},
                                                          **kwargs)
            except sdk.errors.APIError as exc:
                raise _engine_error(exc) from None
            try:
                container.start()
            except sdk.errors.APIError as exc:
                raise _engine_error(exc) from None
            try:
                status = container.wait(timeout=timeout)
            except Exception:  # noqa: BLE001 - requests' ReadTimeout/ConnectionError
                raise CheckFailed(f"{image}: `{' '.join(command)}` did not finish within {timeout:.0f}s") from None
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
            return RunResult(int(status.get("StatusCode", 1)), out, err)
        finally:
            try:
                self.client.api.remove_container(container.id if container else name, force=True)
            except sdk.errors.NotFound:
                pass
            except sdk.errors.APIError:
                pass


    # ----------------------------------------------------------------- containers of jobs

    def create(self, spec: ContainerSpec, gpus: GpuAccess | None = None) -> str:
        body = container_body(spec, gpus, proxy_env(self._client_config(), self.api.base_url))
        return self.api.call("POST", "/containers/create", params={"name": spec.name}, body=body)["Id"]

    def _path(self, cid: str, what: str = "") -> str:
        return f"/containers/{quote(cid, safe='')}{what}"

    def start(self, cid: str) -> None:
        self.api.call("POST", self._path(cid, "/start"))

    def attach(self, cid: str, *, stdin: bool, tty: bool) -> Attachment:
        params = {"stdin": int(stdin), "stdout": 1, "stderr": 1, "stream": 1}
        keys = self._client_config().get("detachKeys")
        if keys:  # as the SDK and the docker CLI do
            params["detachKeys"] = keys
        return self.api.attach(cid, params, tty)

    def wait(self, cid: str) -> int:
        return self.api.call("POST", self._path(cid, "/wait"), timeout=None)["StatusCode"]

    def kill(self, cid: str, signal: str) -> None:
        self.api.call("POST", self._path(cid, "/kill"), params={"signal": signal})

    def resize(self, cid: str, height: int, width: int) -> None:
        self.api.call("POST", self._path(cid, "/resize"), params={"h": height, "w": width})

    def remove(self, cid: str) -> None:
        """Remove a container, gone or not (409: its removal is already under way)."""
        try:
            self.api.call("DELETE", self._path(cid), params={"v": 0, "link": 0, "force": 1})
        except NoSuchContainer:
            pass
        except EngineError as exc:
            if exc.status != 409:
                raise

    def stop(self, cid: str, timeout: int = 10) -> None:
        wait = None if self.api.timeout is None else self.api.timeout + timeout  # the engine waits `timeout` first
        self.api.call("POST", self._path(cid, "/stop"), params={"t": timeout}, timeout=wait)

    def inspect(self, name: str) -> Container | None:
        try:
            info = self.api.call("GET", self._path(name, "/json"))
        except NoSuchContainer:
            return None
        config, state = info.get("Config") or {}, info.get("State") or {}
        return Container(id=info["Id"], name=info["Name"].lstrip("/"), labels=config.get("Labels") or {},
                         tty=bool(config.get("Tty")), running=bool(state.get("Running")),
                         status=state.get("Status") or "", state=state.get("Status") or "",
                         image=config.get("Image") or "", command=" ".join(config.get("Cmd") or ()))

    def containers(self, label: str, *, all_: bool = False) -> list[Container]:
        out = []
        params = {"all": int(all_), "filters": json.dumps({"label": [label]})}
        for c in self.api.call("GET", "/containers/json", params=params):
            out.append(Container(id=c["Id"], name=(c.get("Names") or ["?"])[0].lstrip("/"),
                                 labels=c.get("Labels") or {}, status=c.get("Status") or "",
                                 state=c.get("State") or "", image=c.get("Image") or "",
                                 command=c.get("Command") or "", created=c.get("Created")))
        return out

    def _call(self, method: str, *args, **kwargs):
        """A docker SDK APIClient method, its errors as EngineError."""
        import docker as sdk

        try:
            return getattr(self.client.api, method)(*args, **kwargs)
        except sdk.errors.APIError as exc:
            raise _engine_error(exc) from None

    def logs(self, cid: str, *, follow: bool = False, tail: str = "all"):
        """(STDOUT | STDERR, bytes) as the engine sends them; a TTY job's output is one STDOUT stream."""
        import struct

        api = self.client.api
        tty = bool((self._call("inspect_container", cid).get("Config") or {}).get("Tty"))
        params = {"stdout": 1, "stderr": 1, "follow": int(follow), "tail": tail}
        res = api._get(api._url("/containers/{0}/logs", cid), params=params, stream=True)
        api._raise_for_status(res)
        if follow:
            api._disable_socket_timeout(api._get_raw_response_socket(res))
        if tty:
            for chunk in res.iter_content(4096, False):
                yield STDOUT, chunk
            return
        while len(header := res.raw.read(8)) == 8:  # frames: stream id, size, data (chunked HTTP underneath)
            stream, size = struct.unpack(">BxxxL", header)
            yield (STDERR if stream == 2 else STDOUT), (res.raw.read(size) if size else b"")

    def exec(self, cid: str, command: list[str], *, stdin: bool, tty: bool, env: dict | None = None):
        """Start `command` in a running container: (its streams, resize(height=, width=), exit code or None)."""
        exec_id = self._call("exec_create", cid, command, stdin=stdin, tty=tty, environment=env or None)["Id"]
        sock = self._call("exec_start", exec_id, socket=True, tty=tty)
        return (Attachment(sock, tty), lambda **kw: self._call("exec_resize", exec_id, **kw),
                lambda: self._call("exec_inspect", exec_id).get("ExitCode"))


def _read(path: Path) -> str:
    from ..errors import CudaboxError
    from ..files import read_input

    try:
        return read_input(path).decode("utf-8", "replace")
    except CudaboxError:
        return ""
