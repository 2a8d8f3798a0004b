"""Fixtures for tests that need a real Docker engine (import them into a test module).

`docker_client` requires a reachable engine and the local `debian:bookworm-slim`
base (scripts/start-services.sh makes both). Under `make test`
(CUDABOX_REQUIRE_SERVICES=1, CI) a missing engine or base image is a test
failure; elsewhere (a laptop without Docker) the tests are skipped, with the
reason. Mark such tests `@pytest.mark.docker`.

At the end of the session the project images of the test projects this
session ran `cudabox` in (names starting with TEST_PREFIX) are removed, so the
next session builds them again; nothing else is: several sessions may share
one engine (a dev machine), and stack images are the expensive cache.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import REPO, run_cli

BASE_IMAGE = "debian:bookworm-slim"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # trusted by the network here (PyPI needs it)
TEST_PREFIX = "cb-test-"  # project names of the images tests build; removed at the end of the session
_PROJECTS: set = set()  # directories `cudabox` ran in during this session


def _unavailable(reason: str):
    if os.environ.get("CUDABOX_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (CUDABOX_REQUIRE_SERVICES=1: `make test` starts it with scripts/start-services.sh)",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client():
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - whatever the SDK raises, there is no engine
        _unavailable(f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:200]})")
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        _unavailable(f"the engine has no {BASE_IMAGE} image (scripts/ensure-base-image.sh makes it)")
    yield client
    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    for directory in _PROJECTS:
        try:
            lock = read_lock(directory)
            if lock.project.name.startswith(TEST_PREFIX):
                client.images.remove(project_tag(lock, project_dir=directory))
        except Exception:  # noqa: BLE001 - no lock, never built, still in use: leave it
            pass


@pytest.fixture(scope="session")
def cli_env(tmp_path_factory):
    """Environment for `cudabox` runs shared by a session's builds: its own XDG dirs, no host probing."""
    home = tmp_path_factory.mktemp("docker-xdg")
    env = {var: str(home / var.lower()) for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")}
    env.update(CUDABOX_NO_HOST="1", CUDABOX_CA_CERT="", CUDABOX_BUILDER="", CUDABOX_DOCKER="")
    return env


def make_project(directory: Path, yaml_text: str, env: dict, files: dict | None = None) -> Path:
    """A project directory with cudabox.yaml (and `files`), locked with `cudabox lock`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cudabox.yaml").write_text(yaml_text)
    for name, text in (files or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    _PROJECTS.add(Path(directory))
    run_cli("lock", cwd=directory, env=env, check=0)
    return directory


def cudabox(*args, cwd, env, extra_env=None, timeout=1200):
    """Run the real CLI (builds can take minutes on a cold machine)."""
    _PROJECTS.add(Path(cwd))
    return run_cli(*args, cwd=cwd, env=dict(env, **(extra_env or {})), timeout=timeout)


def openssl_cert(common_name: str, directory: Path) -> str:
    """A fresh self-signed certificate (PEM): content that exists nowhere else, to look for in images."""
    key = directory / "marker.key"
    proc = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-subj", f"/CN={common_name}", "-keyout", str(key)],
                          capture_output=True, text=True, check=True)
    key.unlink()
    return proc.stdout


def cuda_wheel_libs(version: str, requirements=None, key: str | None = None) -> Path:
    """lib/: the .so files of NVIDIA's CUDA runtime + NVRTC wheels of `version` (or of `requirements`: other
    NVIDIA wheels, cached under `key`) (pip download on the host, cached under tests/.artifacts), for
    stand-ins of nvidia/cuda images."""
    cache = REPO / "tests" / ".artifacts" / f"standin-libs-{key or version}"
    if (cache / "done").exists():
        return cache
    wheels = cache.with_name(cache.name + "-wheels")
    requirements = requirements or [f"nvidia-cuda-runtime-cu12=={version}.*", f"nvidia-cuda-nvrtc-cu12=={version}.*"]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d",
                    str(wheels), *requirements], check=True, timeout=900, capture_output=True)
    (cache / "lib").mkdir(parents=True, exist_ok=True)
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if "/lib/" in name and ".so" in Path(name).name:
                    (cache / "lib" / Path(name).name).write_bytes(zf.read(name))
    shutil.rmtree(wheels)
    (cache / "done").write_text("")
    return cache


@pytest.fixture
def registry(docker_client, tmp_path):
    """A local registry (Debian's docker-registry package, no auth) on a free localhost port; the tags
    pushed to it are removed afterwards."""
    (tmp_path / "Dockerfile").write_text("""FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends docker-registry && rm -rf /var/lib/apt/lists/* \\
 && printf 'version: 0.1\\nstorage:\\n  filesystem:\\n    rootdirectory: /var/lib/docker-registry\\n' \\
    > /etc/docker/registry/config.yml \\
 && printf 'http:\\n  addr: :5000\\n' \\
    >> /etc/docker/registry/config.yml
CMD ["/usr/bin/docker-registry", "serve", "/etc/docker/registry/config.yml"]
""")
    image, _ = docker_client.images.build(path=str(tmp_path), tag="cudabox-test/registry:local", rm=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    container = docker_client.containers.run(image.id, detach=True, ports={"5000/tcp": ("127.0.0.1", port)})
    url = f"http://127.0.0.1:{port}"
    for _ in range(50):
        try:
            urllib.request.urlopen(f"{url}/v2/", timeout=2)
            break
        except OSError:
            time.sleep(0.1)
    yield SimpleNamespace(host=f"localhost:{port}", url=url)
    container.remove(force=True)
    for image in docker_client.images.list():
        for tag in image.tags:
            if tag.startswith(f"localhost:{port}/"):  # only the tags made for the push
                docker_client.images.remove(tag)
