"""`cudabox run`: a command in the project's own stack, through the engine interface (cudabox.engine).

The fast path (fresh lock, image present) reads two small files and makes the
same engine calls as `docker run` (inspect, create, attach, start, wait,
remove): no resolution, no matrix, no build-context hashing. The job runs as
the invoking user (files written to the mounted project stay theirs) with a
writable HOME, the host's package/model caches, and signals forwarded, so
Ctrl-C ends the job and leaves no container behind. Container I/O (streams,
TTY, signals) lives in run_io.py; ps/logs/stop/exec there too.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CudaboxError, EnvironmentProblem, InputError
from ..files import read_input_text
from ..engine import ContainerSpec, EngineError
from .run_io import CLIENT_LABEL, LABEL, client_id

HOME = "/home/cudabox"  # a tmpfs owned by the job's user
# Host variables a job sees without -e: GPU selection, tokens, proxies, NCCL/threads tuning.
PASS_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_DEVICE_ORDER",
            "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "WANDB_API_KEY", "WANDB_MODE",
            "OMP_NUM_THREADS", "TORCH_CUDA_ARCH_LIST", "http_proxy", "https_proxy", "no_proxy",
            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
PASS_PREFIXES = ("NCCL_",)
# (variable in the job, host cache subdirectory, mount point when the image doesn't set the variable)
CACHES = (("PIP_CACHE_DIR", "pip", "/cache/pip"), ("UV_CACHE_DIR", "uv", "/cache/uv"),
          ("HF_HOME", "huggingface", "/cache/huggingface"), ("TORCH_HOME", "torch", "/cache/torch"))
ULIMITS = (("memlock", -1, -1), ("stack", 67108864, 67108864))  # NCCL: pinned memory, deep stacks


@dataclass
class RunOptions:
    """Everything `cudabox run` was asked; the CLI fills it, a backend (docker, later slurm/k8s) runs it."""

    project: Path = Path(".")
    command: list[str] = field(default_factory=list)
    gpus: str | None = None  # all | none | 0,2 | GPU-UUID; None: all when the host has GPUs
    env: list[str] = field(default_factory=list)  # KEY=VAL or KEY (from the host)
    env_files: list[Path] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    workdir: str | None = None  # where the project is mounted; default: the lock's workdir
    name: str | None = None
    user: str | None = None  # UID[:GID]; default: the invoking user's
    ipc: str | None = "host"  # host: DataLoader workers share tensors through /dev/shm
    shm_size: str | None = None  # instead of --ipc host: a private /dev/shm of this size
    tty: bool | None = None  # None: when stdin and stdout are terminals
    interactive: bool = False  # keep stdin open (implied by a TTY)
    detach: bool = False
    keep: bool = False  # don't remove the container when the job ends
    caches: bool = True
    mount_project: bool = True
    no_host: bool = False
    labels: dict = field(default_factory=dict)


def say(message: str) -> None:
    """cudabox's own lines go to stderr: stdout belongs to the job."""
    sys.stderr.write(f"cudabox: {message}\n")
    sys.stderr.flush()


def engine():
    """The container engine, or EnvironmentProblem (exit 5) naming what to do."""
    from ..engine import connect

    return connect()


# --------------------------------------------------------------------------- lock and image


def fresh_lock(project: Path, *, no_host: bool = False):
    """The project's lock; re-locked (and said so) when cudabox.yaml changed or no lock exists. The everyday
    case, nothing changed, is told by the files' bytes alone: cudabox.yaml is parsed only when they differ."""
    from ..lock.lockfile import LOCK_FILE, inputs_unchanged, read_lock, write_lock

    old = read_lock(project) if (project / LOCK_FILE).exists() else None
    if old is not None and inputs_unchanged(old, project):
        return old
    from ..project.spec import load_spec

    spec = load_spec(project)
    if old is not None and old.inputs_hash == spec.inputs_hash:
        return old
    from ..lock.resolution import lock_project

    _, lock = lock_project(spec, no_host=no_host, previous=old)
    write_lock(lock, project)
    if old is None:
        say(f"no {LOCK_FILE} yet: locked {spec.source_file} (stack {lock.stack_hash[:12]})")
    else:
        change = "same stack" if old.stack_hash == lock.stack_hash else \
            f"stack {old.stack_hash[:12]} -> {lock.stack_hash[:12]}"
        say(f"{spec.source_file} changed since {LOCK_FILE} was written: re-locked ({change})")
    return lock


def image_for(engine, project: Path, lock) -> dict:
    """The project image's attributes; built first (with progress) when missing. Validating is
    `cudabox build`'s and `cudabox validate`'s job: a job should start as soon as its image exists."""
    from ..image.build import ensure_image, project_tag

    tag = project_tag(lock, project_dir=project)
    found = engine.image(tag)
    if found:
        return found
    say(f"image {tag} not built yet: building it")
    built = ensure_image(project, lock=lock, progress=True, validate=False, engine=engine)
    return engine.image(built.tag)


# --------------------------------------------------------------------------- GPUs and the driver


def host_has_gpu() -> bool:
    """Cheap: the device nodes or the explicit environment; no NVML or nvidia-smi on the fast path."""
    if os.environ.get("CUDABOX_NO_HOST") not in (None, "", "0"):
        return False
    if os.environ.get("CUDABOX_GPUS"):
        return True
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def parse_gpus(text: str) -> tuple[str, ...]:
    """all | none | 0,2 (device indexes, not a count) | GPU-UUID[,...] -> ("all",) | the devices | ().

    The engine turns them into its own request (--gpus style, or CDI names nvidia.com/gpu=0)."""
    text = text.strip()
    if text == "none":
        return ()
    ids = ["all"] if text == "all" else [part.strip() for part in text.removeprefix("device=").split(",")]
    for part in ids:
        if not re.fullmatch(r"all|\d+|(GPU|MIG)-[A-Za-z0-9/-]+", part) or (part == "all" and len(ids) > 1):
            raise InputError(f"--gpus {text}: {part!r} is not a GPU index or UUID (all | none | 0,2 | GPU-<uuid>)")
    return tuple(ids)


def driver_problem(stack, driver: str, gpus=()) -> str | None:
    """None when `driver` (and the host's GPUs, when given) run the stack; else why not, naming the driver
    needed. Docker's CDI path skips the NVIDIA toolkit's own NVIDIA_REQUIRE_CUDA check, so cudabox does it,
    from the lock alone (cudabox/lock/fit.py: no matrix)."""
    from ..lock.fit import stack_runs

    fit = stack_runs(stack, driver, gpus)
    if fit.ok:
        return None
    return (f"{fit.why}. Upgrade the driver, or re-lock for it: set `driver: \"{driver}\"` in cudabox.yaml "
            "(or run `cudabox lock` on this host without one)")


def preflight(lock, image: dict, *, no_host: bool = False) -> None:
    from .. import host as host_mod

    host = host_mod.detect(ignore=no_host)
    if not host.driver:
        return  # nothing to compare; the engine says what's missing
    gpus = [g for g in host.gpus if g.cc]
    problem = driver_problem(lock.stack, host.driver, gpus)
    if problem:
        raise EnvironmentProblem(problem)


# --------------------------------------------------------------------------- the container's configuration


def parse_env(opts: RunOptions, environ=os.environ) -> dict:
    """Pass-through list, then --env-file, then -e (later wins). `KEY` alone takes the host's value."""
    env = {k: v for k, v in environ.items() if k in PASS_ENV or k.startswith(PASS_PREFIXES)}
    items = []
    for path in opts.env_files:
        try:
            lines = read_input_text(Path(path), shown=str(path)).splitlines()  # bounded, a regular file
        except CudaboxError as exc:
            raise InputError(f"--env-file {exc}") from None
        items += [(f"{path}:{n}", line.strip()) for n, line in enumerate(lines, 1)
                  if line.strip() and not line.strip().startswith("#")]
    items += [("-e", item) for item in opts.env]
    for where, item in items:
        key, eq, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise InputError(f"{where}: {item!r}: expected KEY=VALUE or KEY")
        if eq:
            env[key] = value
        elif key in environ:
            env[key] = environ[key]
    return env


LOOPBACK = "127.0.0.1"


def parse_ports(specs: list[str]) -> tuple[list, dict]:
    """-p [IP:][HOST:]CONTAINER[/proto] -> (exposed ports, bindings). Unlike `docker run -p`, a port without
    an address is published on 127.0.0.1 only (a notebook server is not put on the network by accident; give
    0.0.0.0 for that), and `-p 8888` means host port 8888 (IP::8888 for any free one)."""
    ports, bindings = [], {}
    for spec in specs:
        m = re.fullmatch(r"(?:(\d{1,3}(?:\.\d{1,3}){3}):)?(?:(\d*):)?(\d+)(?:/(tcp|udp|sctp))?", spec)
        if not m or not all(0 < int(p) < 65536 for p in (m.group(2), m.group(3)) if p):
            raise InputError(f"-p {spec}: expected [IP:][HOST_PORT:]CONTAINER_PORT[/tcp|udp] (ports 1-65535)")
        ip, host_port, port, proto = m.groups()
        key = f"{port}/{proto or 'tcp'}"
        ports.append((int(port), proto or "tcp"))
        host = int(port) if host_port is None else (int(host_port) if host_port else None)
        bindings.setdefault(key, []).append((ip or LOOPBACK, host) if host else (ip or LOOPBACK,))
    return ports, {k: v if len(v) > 1 else v[0] for k, v in bindings.items()}


def parse_volume(spec: str) -> str:
    """-v SRC:DST[:ro|rw]: a relative SRC is a host path from the current directory; else a named volume."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[1].startswith("/") or (len(parts) == 3 and parts[2] not in
                                                                      ("ro", "rw", "z", "Z")):
        raise InputError(f"-v {spec}: expected HOST_PATH:CONTAINER_PATH[:ro] or VOLUME:CONTAINER_PATH[:ro]")
    if parts[0].startswith((".", "/", "~")):
        parts[0] = str(Path(parts[0]).expanduser().resolve())
    return ":".join(parts) if len(parts) == 3 else ":".join(parts + ["rw"])


def shm_size(text: str | None) -> int | None:
    """--shm-size in bytes (16g, 512m: Docker's units), or InputError."""
    if text is None:
        return None
    from ..engine.api import parse_bytes

    try:
        return parse_bytes(text)
    except EngineError as exc:
        raise InputError(f"--shm-size {text}: {exc.explanation}") from None


def job_user(opts: RunOptions) -> tuple[int, int]:
    text = opts.user or os.environ.get("CUDABOX_RUN_USER") or f"{os.getuid()}:{os.getgid()}"
    m = re.fullmatch(r"(\d+)(?::(\d+))?", text)
    if not m:
        raise InputError(f"--user {text}: expected UID[:GID] (numbers: the job writes files as this user)")
    return int(m.group(1)), int(m.group(2) or m.group(1))


def cache_binds(image_env: dict, env: dict, uid: int, gid: int) -> tuple[list[str], dict]:
    """The host's pip/uv/Hugging Face/torch caches, mounted where the job looks for them."""
    from ..paths import cache_dir

    base = cache_dir().parent  # ~/.cache (XDG_CACHE_HOME)
    binds, extra_env = [], {}
    for var, sub, default in CACHES:
        host = Path(os.environ.get(var) or base / sub) if var == "HF_HOME" else base / sub
        target = env.get(var) or image_env.get(var) or default
        if not target.startswith("/"):
            continue
        if not host.exists():
            host.mkdir(parents=True, exist_ok=True)
            if os.getuid() == 0 and uid != 0:
                os.chown(host, uid, gid)
        binds.append(f"{host}:{target}:rw")
        if var not in env and var not in image_env:
            extra_env[var] = target
    return binds, extra_env


def container_spec(opts: RunOptions, lock, image: dict, gpus: str = "none") -> ContainerSpec:
    """The job's container: mounts, user, GPUs, IPC, ulimits, env, ports, labels."""
    cfg = image.get("Config") or {}
    image_env = dict(item.partition("=")[::2] for item in cfg.get("Env") or [])
    uid, gid = job_user(opts)
    env = parse_env(opts)
    workdir = opts.workdir or lock.project.workdir
    if not re.fullmatch(r"/[A-Za-z0-9._/-]*", workdir):
        raise InputError(f"--workdir {workdir!r}: expected an absolute container path")
    binds = [f"{opts.project.resolve()}:{workdir}:rw"] if opts.mount_project else []
    if opts.caches:
        more, cache_env = cache_binds(image_env, env, uid, gid)
        binds += more
        env = {**cache_env, **env}
    binds += [parse_volume(v) for v in opts.volumes]
    env.setdefault("HOME", HOME)
    tty = opts.tty
    if tty and "TERM" in os.environ:
        env.setdefault("TERM", os.environ["TERM"])
    _, bindings = parse_ports(opts.ports)
    labels = {LABEL: "1", "io.cudabox.project": lock.project.name, "io.cudabox.lock.hash": lock.hash,
              "io.cudabox.project.dir": str(opts.project.resolve()), **opts.labels}
    if not opts.detach and not opts.keep:  # removed by this process when it ends; by the next run/ps if killed
        labels[CLIENT_LABEL] = client_id()
    return ContainerSpec(
        image=image["Id"], command=opts.command or None, user=f"{uid}:{gid}", env=env, workdir=workdir,
        labels=labels, name=opts.name, tty=bool(tty), stdin=bool(opts.interactive or tty), binds=binds,
        ports=bindings, gpus=parse_gpus(gpus), ipc=None if opts.shm_size and opts.ipc == "host" else opts.ipc,
        shm_size=opts.shm_size, ulimits=tuple(ULIMITS),
        tmpfs={env["HOME"]: f"exec,mode=0755,uid={uid},gid={gid}"} if env["HOME"] == HOME else {})


GPU_FIX = ("install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker` and "
           "restart dockerd; or run without a GPU: --gpus none")


def _gpu_error(exc) -> EnvironmentProblem | None:
    text = str(exc)
    if "could not select device driver" in text or "Unknown runtime specified nvidia" in text:
        return EnvironmentProblem("the engine has no NVIDIA GPU support ('could not select device driver \"\" "
                                  "with capabilities: [[gpu]]')", hint=GPU_FIX)
    return None


def _explain(exc, doing: str):
    """An engine error as one line: GPU support missing (with the fix), else what the engine said."""
    return _gpu_error(exc) or EnvironmentProblem(f"{doing}: {exc.explanation}")


# Engines without CAP_SYS_RESOURCE (rootless, some sandboxes) refuse to raise memlock; remembered a day
# per engine, so only the first job there pays for the refused start.
_LIMITS_FILE = "engine-ulimits.json"
_RLIMIT_TYPES = {"8": "memlock", "3": "stack"}


def _refused_limits() -> dict:
    import json
    import time

    from ..paths import cache_dir

    try:
        data = json.loads((cache_dir() / _LIMITS_FILE).read_text())
        entry = data.get(os.environ.get("DOCKER_HOST", "local"), {})
        return entry if time.time() - entry.get("time", 0) < 86400 else {}
    except (OSError, ValueError, AttributeError):
        return {}


def _remember_refused(name: str) -> None:
    import json
    import time

    from ..files import write_atomic
    from ..paths import cache_dir

    path = cache_dir() / _LIMITS_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    key = os.environ.get("DOCKER_HOST", "local")
    names = sorted(set(_refused_limits().get("names", [])) | {name})
    data[key] = {"names": names, "time": time.time()}
    write_atomic(path, json.dumps(data, indent=1))


def run(opts: RunOptions) -> int:
    """The docker backend of `cudabox run`: returns the job's exit code (0 when detached)."""
    from . import run_io

    if opts.tty is None:
        opts.tty = sys.stdin.isatty() and sys.stdout.isatty()
    gpus = opts.gpus if opts.gpus is not None else ("all" if host_has_gpu() else "none")
    parse_gpus(gpus), parse_ports(opts.ports), [parse_volume(v) for v in opts.volumes], job_user(opts)  # input
    shm_size(opts.shm_size)
    lock = fresh_lock(opts.project, no_host=opts.no_host)
    eng = engine()
    image = image_for(eng, opts.project, lock)
    access = None
    if gpus != "none":
        preflight(lock, image, no_host=opts.no_host)
        access = eng.gpu_access()
        if not access.available:
            raise EnvironmentProblem(f"--gpus {gpus}: {access.reason}", hint=GPU_FIX)
    spec = container_spec(opts, lock, image, gpus)
    from ..lock.known import mark_run, remember_project

    remember_project(opts.project)
    mark_run(image["Id"])  # `cudabox images ls` shows it; `images prune --unused-days` reads it
    run_io.reap(eng)
    refused = set(_refused_limits().get("names", []))
    while True:
        spec.ulimits = tuple(u for u in spec.ulimits if u[0] not in refused)
        try:
            return run_io.run_container(eng, spec, access, detach=opts.detach, keep=opts.keep, explain=_explain)
        except run_io.LimitRefused as exc:
            name = _RLIMIT_TYPES.get(exc.kind)
            if name is None or name in refused:
                raise EnvironmentProblem(f"the engine refused the job's ulimits: {exc}") from None
            refused.add(name)
            _remember_refused(name)
            say(f"this engine may not raise the {name} ulimit (no CAP_SYS_RESOURCE): running with its default")
