"""The project's image in the tools people already use: a dev container (VS Code, the devcontainer CLI,
Codespaces-style hosts) and a Compose service.

Both say what `cudabox run` does, in the other tool's words: the project's image (tagged by lock hash, so
the files are regenerated after `cudabox lock`; `--check` tells), the project mounted at its workdir, the
user's uid, the GPUs, host IPC and NCCL's ulimits, and the host's pip/uv/Hugging Face/torch caches.
Their schemas are checked in tests (tests/schemas/, vendored with their sources).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import CudaboxError, InputError
from ..files import read_input_text
from .run import CACHES, HOME, ULIMITS, cache_binds, parse_ports

DEVCONTAINER_FILE = Path(".devcontainer") / "devcontainer.json"
COMPOSE_FILE = Path("compose.yaml")
IMAGE_USER = "cudabox"  # the image's non-root user (templates/Dockerfile.j2), uid 1000
GPU_MODES = ("optional", "required", "none")


@dataclass(frozen=True)
class Exported:
    path: Path
    text: str


def _ulimit_args() -> list[str]:
    return [f"--ulimit={name}={soft}:{hard}" for name, soft, hard in ULIMITS]


def devcontainer(lock, image: str, *, gpu: str = "optional", build: bool = True, own_image: bool = True) -> dict:
    """.devcontainer/devcontainer.json: opens the project in its cudabox image. The devcontainer CLI adds
    `--gpus all` itself when hostRequirements.gpu allows it and the host has GPUs; updateRemoteUserUID gives
    the image's user the local uid, so files written in the workspace stay the user's."""
    if gpu not in GPU_MODES:
        raise InputError(f"--gpu {gpu}: expected one of {', '.join(GPU_MODES)}")
    workdir = lock.project.workdir
    mounts, env, dirs = [], {}, []
    for var, sub, target in CACHES:
        mounts.append({"source": f"${{localEnv:HOME}}/.cache/{sub}", "target": target, "type": "bind"})
        env[var] = target
        dirs.append(f'"$HOME/.cache/{sub}"')
    # bind sources must exist, and be the user's (the engine would create them as root)
    # before the container starts: the file still matches the lock (same options), and the image exists
    same = "".join([f" --gpu {gpu}" if gpu != "optional" else "",
                    "" if own_image else f" --image {shlex.quote(image)}"])
    init = f"mkdir -p {' '.join(dirs)}"
    if build:
        init += f" && cudabox export devcontainer --check{same}" + (" && cudabox build" if own_image else "")
    config = {
        "name": f"{lock.project.name} (cudabox)",
        "image": image,
        "initializeCommand": init,
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={workdir},type=bind",
        "workspaceFolder": workdir,
        "containerUser": IMAGE_USER,
        "remoteUser": IMAGE_USER,
        "updateRemoteUserUID": True,
        "runArgs": ["--ipc=host", "--init", *_ulimit_args()],
        "mounts": mounts,
        "containerEnv": env,
        "customizations": {"vscode": {"extensions": ["ms-python.python"],
                                      "settings": {"python.defaultInterpreterPath": "/opt/venv/bin/python"}}},
    }
    if gpu != "none":
        config["hostRequirements"] = {"gpu": True if gpu == "required" else "optional"}
    return config


def devcontainer_text(config: dict) -> str:
    return json.dumps(config, indent=2) + "\n"


def _gpu_devices(gpus: str) -> list[dict]:
    """--gpus all | none | N (a count) | 0,2 / GPU-uuid (device ids) -> deploy.resources.reservations.devices."""
    gpus = gpus.strip()
    if gpus == "none":
        return []
    device = {"driver": "nvidia", "capabilities": ["gpu"]}
    if gpus == "all":
        return [dict(device, count="all")]
    if gpus.isdigit():
        return [dict(device, count=int(gpus))]
    ids = [part.strip() for part in gpus.split(",")]
    if not all(re.fullmatch(r"\d+|(GPU|MIG)-[A-Za-z0-9/-]+", part) for part in ids):
        raise InputError(f"--gpus {gpus}: expected all, none, a count, or device ids (0,2 | GPU-<uuid>)")
    return [dict(device, device_ids=ids)]


def compose(lock, image: str, *, command: list[str] | None = None, gpus: str = "all", uid: int, gid: int,
            ports: list[str] | None = None, shm_size: str | None = None, source: str = ".") -> dict:
    """A Compose file with one service that runs the project's image the way `cudabox run` does."""
    from ..image.build import repo_name

    workdir = lock.project.workdir
    binds, cache_env = cache_binds({}, {}, uid, gid)  # creates missing cache dirs as the user, like `run`
    volumes = [{"type": "bind", "source": source, "target": workdir}]  # relative: to the compose file
    for bind in binds:
        source, target, _ = bind.rsplit(":", 2)
        volumes.append({"type": "bind", "source": source, "target": target})
    service = {
        "image": image,
        "user": f"{uid}:{gid}",
        "working_dir": workdir,
        "init": True,
        "environment": {"HOME": HOME, **cache_env},
        "volumes": volumes,
        "tmpfs": [f"{HOME}:exec,mode=0755,uid={uid},gid={gid}"],  # a writable HOME for any uid
        "ulimits": {name: {"soft": soft, "hard": hard} for name, soft, hard in ULIMITS},
    }
    if shm_size:
        service["shm_size"] = shm_size
    else:
        service["ipc"] = "host"  # DataLoader workers share tensors through /dev/shm
    if ports:
        parse_ports(ports)  # validated like `run -p`
        service["ports"] = [_port(spec) for spec in ports]
    devices = _gpu_devices(gpus)
    if devices:
        service["deploy"] = {"resources": {"reservations": {"devices": devices}}}
    if command:
        service["command"] = list(command)
    # Compose project names: lowercase letters, digits, '-' and '_', starting with a letter or digit
    name = re.sub(r"[^a-z0-9_-]+", "-", repo_name(lock.project.name)).strip("-_") or "project"
    return {"name": name, "services": {name: service}}


def _port(spec: str) -> str:
    """Like `cudabox run -p`: a port without an address is published on 127.0.0.1 only."""
    parts = spec.split(":")
    if len(parts) == 1:
        return f"127.0.0.1:{parts[0].split('/')[0]}:{spec}"
    if len(parts) == 2:
        return f"127.0.0.1:{spec}"
    return spec


def compose_text(lock, config: dict) -> str:
    from .k8s import to_yaml

    return (f"# Generated by `cudabox export compose` from cudabox.lock (lock {lock.hash[:12]}); run it again "
            "after `cudabox lock`.\n# docker compose run --rm " + next(iter(config["services"]))
            + " CMD...   (docs/editors.md)\n" + to_yaml(config))


def check(path: Path, text: str) -> str | None:
    """None when `path` holds exactly `text`; else why not (for --check)."""
    if not path.is_file():
        return f"{path} does not exist"
    try:
        have = read_input_text(path, shown=str(path))  # bounded: a link to /dev/zero is "not it", not a hang
    except CudaboxError as exc:
        return str(exc)
    if have != text:
        return f"{path} is not what cudabox would write now (the lock or cudabox changed)"
    return None
