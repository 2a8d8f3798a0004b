"""The installed package works outside the checkout (issue 15): the wheel and the sdist carry matrices/ and
templates/ (as cudabox/_data/), and an install from the wheel into a fresh venv runs the daily commands.

Builds go through pip (an isolated PEP 517 build, as `pip install .` does) and the install resolves the
dependencies from the package index like a user's would (pip's cache keeps it quick): hence `network`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.network

DATA = ("matrices", "templates")
# pip's and uv's caches of the developer or CI (read before conftest points XDG_CACHE_HOME at a tmp dir):
# downloads are reused across runs, the installs themselves are real
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
CACHES = {"PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(_CACHE / "pip"),
          "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(_CACHE / "uv")}


def _tracked(directory: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", directory], cwd=REPO, capture_output=True, text=True, check=True)
    return {line for line in out.stdout.splitlines() if line}


def _pip(*args, cwd=None, timeout=600):
    proc = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **CACHES))
    assert proc.returncode == 0, f"pip {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _clean_env(tmp: Path) -> dict:
    """No trace of the checkout or the dev venv: no PYTHONPATH, PATH without .venv/bin, own XDG dirs."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(REPO)) and Path(p) != Path(sys.executable).parent)
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[var] = str(tmp / "xdg" / var.lower())
    env["CUDABOX_NO_HOST"] = "1"
    return dict(env, **CACHES)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored), working-tree content: builds
    happen there, so no stale build/ of the checkout leaks into the wheel and nothing is written into it."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, check=True).stdout.decode().split("\0")
    root = tmp_path_factory.mktemp("src") / "cudabox-src"
    for rel in filter(None, out):
        if (REPO / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    return root


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, source) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _pip("wheel", "--no-deps", "-q", "-w", str(out), str(source))
    (found,) = out.glob("cudabox-*.whl")
    return found


def test_wheel_carries_the_bundled_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for directory in DATA:
        tracked = _tracked(directory)
        assert tracked, f"git lists nothing under {directory}/"
        missing = sorted(f"cudabox/_data/{path}" for path in tracked if f"cudabox/_data/{path}" not in names)
        assert not missing, f"the wheel lacks {missing}"
    assert not [n for n in names if n.startswith(("images/", "cudabox/_data/images"))], "images/ is a repo artefact"
    assert not [n for n in names if n.startswith("tests/")]


def test_sdist_builds_a_complete_wheel(tmp_path, source):
    """The sdist carries matrices/ and templates/, and a wheel built from it (what pip does with an sdist)
    has them inside the package."""
    code = ("import sys; from setuptools import build_meta as b; "
            f"print(b.build_sdist({str(tmp_path)!r}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    sdist = tmp_path / proc.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    for directory in DATA:
        assert _tracked(directory) <= members, f"the sdist lacks {sorted(_tracked(directory) - members)}"
    assert "setup.py" in members and "MANIFEST.in" in members
    assert not [m for m in members if m.startswith("images/")]

    _pip("wheel", "--no-deps", "-q", "-w", str(tmp_path / "from-sdist"), str(sdist))
    (built,) = (tmp_path / "from-sdist").glob("cudabox-*.whl")
    names = set(zipfile.ZipFile(built).namelist())
    assert {f"cudabox/_data/{p}" for d in DATA for p in _tracked(d)} <= names


def test_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    # no pip inside (ensurepip is the slow part of a venv): this pip installs into it (`pip --python`)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    _pip("--python", str(py), "install", "-q", str(wheel))
    env = _clean_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("torch==2.7.*\nnumpy\n")

    def cudabox(*args, rc=0):
        proc = subprocess.run([str(venv / "bin" / "cudabox"), *args], cwd=project, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == rc, f"cudabox {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    where = subprocess.run([str(py), "-c", "import cudabox, cudabox.paths as p; print(cudabox.__file__); "
                                           "print(p.matrices_dir()); print(p.templates_dir())"],
                           cwd=project, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(line.startswith(str(venv)) for line in where), where  # the install's copy, not the checkout's

    # --no-packages: torch's own index (download.pytorch.org) is not reachable from these machines
    cudabox("init", "--yes", "--no-packages")
    assert (project / "cudabox.yaml").is_file() and (project / "cudabox.lock").is_file()
    assert "torch" in cudabox("resolve").stdout
    (project / "cudabox.lock").unlink()
    cudabox("lock", "--no-packages")
    assert (project / "cudabox.lock").is_file()
    assert "cudabox lock" in cudabox("dockerfile", rc=2).stderr  # an unpinned lock is not built
    (project / "cudabox.yaml").write_text('name: wheel-test\npython: "3.11"\ncuda: "12.8"\n')  # PyPI only
    cudabox("lock")
    dockerfile = cudabox("dockerfile").stdout
    assert dockerfile.startswith("# Dockerfile generated by cudabox") and "--require-hashes" in dockerfile
    assert "2.7" in cudabox("matrix", "show", "torch").stdout
    assert "ok" in cudabox("matrix", "check").stdout
    version = subprocess.run([str(py), "-m", "cudabox", "--version"], cwd=project, env=env, capture_output=True,
                             text=True, timeout=60)
    metadata = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('cudabox'))"],
                              cwd=project, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert version.returncode == 0 and version.stdout.strip() == f"cudabox {metadata}"  # one version source
    # repository artefacts are refused with the flag to use instead, not written into site-packages
    refused = cudabox("images", "check", rc=2)
    assert "--output" in refused.stderr and "Traceback" not in refused.stderr


def test_uv_tool_install_of_the_wheel(wheel, tmp_path):
    """`uv tool install cudabox-*.whl` (uv from PyPI): its own venv, `cudabox` on the tool bin dir."""
    tools = tmp_path / "uv-pkg"
    _pip("install", "-q", "--target", str(tools), "uv")
    env = _clean_env(tmp_path)
    env.update(UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"),
               UV_PYTHON_DOWNLOADS="never", UV_NATIVE_TLS="1")
    if os.environ.get("PIP_CERT"):  # the CA bundle pip is told to trust (a TLS-inspecting proxy)
        env.setdefault("SSL_CERT_FILE", os.environ["PIP_CERT"])
    install = subprocess.run([str(tools / "bin" / "uv"), "tool", "install", "--python", sys.executable, str(wheel)],
                             env=env, capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    project = tmp_path / "project"
    project.mkdir()
    (project / "cudabox.yaml").write_text('name: uv-tool\ncuda: "12.8"\n')
    exe = str(tmp_path / "bin" / "cudabox")
    for args in (["lock"], ["dockerfile"], ["matrix", "check"]):
        proc = subprocess.run([exe, *args], cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"cudabox {' '.join(args)}: {proc.stderr}"
    assert "FROM " in proc.stdout or "ok" in proc.stdout
    where = subprocess.run([str(tmp_path / "tools" / "cudabox" / "bin" / "python"), "-c",
                            "import cudabox.paths as p; print(p.templates_dir())"], cwd=project, env=env,
                           capture_output=True,
                           text=True, check=True).stdout
    assert where.startswith(str(tmp_path / "tools"))
