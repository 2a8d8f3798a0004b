"""The package lock (cudabox/lock/packages.py): offline, against PEP 503 indexes of tiny wheels the tests build.

No network: the indexes are file:// directories (tests/wheels.py); uv is the pinned one. The live test
against PyPI is the last one (marked network; PyPI is the only index reachable from these machines).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cudabox.errors import Unsatisfiable
from cudabox.lock.packages import compile_pins, pylock_text, uv_binary
from tests.support import REPO, run_cli
from tests.wheels import Index

PLATFORM = "x86_64-manylinux_2_36"
UV = next(t["version"] for t in yaml.safe_load((REPO / "matrices" / "images.yaml").read_text())["tools"]
          if t["name"] == "uv")
LINUX_311 = dict(python_tag="cp311", abi="cp311", platform="manylinux_2_17_x86_64")


@pytest.fixture(scope="module")
def uv():
    return uv_binary(UV)


def test_host_uv_is_the_images_uv():
    """The lock and the build must use one uv: pyproject's pin is images.yaml's."""
    images = yaml.safe_load((REPO / "matrices" / "images.yaml").read_text())
    pinned = next(t["version"] for t in images["tools"] if t["name"] == "uv")
    assert f'"uv=={pinned}"' in (REPO / "pyproject.toml").read_text()


def test_each_package_comes_from_one_index(tmp_path, uv):
    """Index confusion at lock time: the framework's index also serves a newer `helper`, and the default
    index a higher `fwlib`; the framework comes from its index only, everything else from the default."""
    fw, default = Index(tmp_path / "fw"), Index(tmp_path / "pypi")
    fw.add("fwlib", "1.0.0+cu1", requires=["helper>=1"])
    fw.add("helper", "9.0")
    default.add("fwlib", "2.0")
    default.add("helper", "1.5")
    pins = compile_pins(["fwlib==1.0.0+cu1"], uv=uv, python="3.11", platform=PLATFORM,
                        sources={"fwlib": fw.url}, index_url=default.url)
    got = {p.name: (p.version, p.index, p.files[0][0]) for p in pins}
    assert got["fwlib"][:2] == ("1.0.0+cu1", fw.url) and "/fw/files/" in got["fwlib"][2]
    assert got["helper"][:2] == ("1.5", default.url) and "/pypi/files/" in got["helper"][2]
    assert all(len(p.files[0][1]) == 64 for p in pins)


def test_unchanged_inputs_keep_their_pins_until_upgraded(tmp_path, uv):
    idx = Index(tmp_path / "pypi")
    idx.add("helper", "1.5")
    first = compile_pins(["helper"], uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url)
    idx.add("helper", "1.6")
    kept = compile_pins(["helper"], uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url, previous=first)
    assert [p.version for p in kept] == ["1.5"]
    moved = compile_pins(["helper"], uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url, previous=first,
                         upgrade_packages=("helper",))
    assert [p.version for p in moved] == ["1.6"]
    assert 'name = "helper"' in pylock_text(first)


def _plain_index(tmp_path) -> Index:
    """A local stand-in for PyPI with what a plain CUDA 12.8 stack pins (tiny fakes of NVIDIA's wheels)."""
    idx = Index(tmp_path / "index")
    idx.add("nvidia-cuda-runtime-cu12", "12.8.90")
    idx.add("nvidia-cuda-nvrtc-cu12", "12.8.93")
    idx.add("pip", "25.3")  # the stack locks pip too (no unlocked seed packages in the image's venv)
    idx.add("uv", UV)  # the build stage's installer: locked from the same index
    return idx


def _project(tmp_path, requirements, python=None) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    text = 'name: demo\ncuda: "12.8"\nrequirements: ' + json.dumps(requirements) + "\n"
    if python:
        text += f'python: "{python}"\n'
    (project / "cudabox.yaml").write_text(text)
    return project


def test_python_falls_back_when_the_newest_has_no_wheel(tmp_path):
    """oldpin 1.0 has a wheel for CPython 3.10 only: the lock says so and takes Python 3.10."""
    idx = _plain_index(tmp_path)
    idx.add("oldpin", "1.0", python_tag="cp310", abi="cp310", platform="manylinux_2_17_x86_64")
    project = _project(tmp_path, ["oldpin==1.0"])
    run_cli("lock", cwd=project, env={"CUDABOX_PIP_INDEX_URL": idx.url}, check=0)
    lock = json.loads((project / "cudabox.lock").read_text())
    stack = lock["stack"]
    assert stack["python"] == "3.10"
    assert any(line.startswith("Python 3.10: the packages can't all be installed on Python 3.11") for line in stack["why"])
    assert [p["name"] for p in lock["project"]["pins"]] == ["oldpin"]
    assert "cp310" in lock["project"]["pins"][0]["files"][0]["url"]


def test_no_python_with_a_wheel_is_exit_3_naming_the_package(tmp_path):
    idx = _plain_index(tmp_path)
    idx.add("ancient", "0.1", python_tag="cp36", abi="cp36m", platform="manylinux1_x86_64")
    project = _project(tmp_path, ["ancient==0.1"], python=">=3.10,<3.13")
    proc = run_cli("lock", cwd=project, env={"CUDABOX_PIP_INDEX_URL": idx.url})
    assert proc.returncode == 3, proc.stderr
    for python in ("3.12", "3.11", "3.10"):  # the chosen one, then the older ones cudabox.yaml allows
        assert f"  - Python {python}: Because ancient==0.1 has no wheels with a matching Python" in proc.stderr
    assert not (project / "cudabox.lock").exists()


def test_lock_is_sorted_one_package_per_line_and_check_sees_tampering(tmp_path):
    idx = _plain_index(tmp_path)
    idx.add("zeta", "1.0")
    idx.add("alpha", "2.0")
    project = _project(tmp_path, ["zeta", "alpha"], python="3.11")
    env = {"CUDABOX_PIP_INDEX_URL": idx.url}
    run_cli("lock", cwd=project, env=env, check=0)
    text = (project / "cudabox.lock").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith('{"name": ')]
    assert [json.loads(line.rstrip(","))["name"] for line in lines] == [
        "alpha", "zeta", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12", "pip", "uv"]  # project's, stack's, tools'
    assert json.loads(text)["stack"]["tool_pins"][0]["version"] == UV
    run_cli("lock", "--check", cwd=project, env=env, check=0)
    (project / "cudabox.lock").write_text(text.replace('"version": "2.0"', '"version": "2.1"'))
    proc = run_cli("lock", "--check", cwd=project, env=env)
    assert proc.returncode == 2 and "lock_hash" in proc.stderr
    # relocking with the same inputs writes the same bytes
    (project / "cudabox.lock").write_text(text)
    run_cli("lock", cwd=project, env=env, check=0)
    assert (project / "cudabox.lock").read_text() == text


@pytest.mark.network
def test_live_lock_against_pypi(tmp_path):
    """A small real project locked against PyPI, the only index these machines reach (download.pytorch.org
    is not: framework stacks are locked offline above, against local indexes)."""
    project = _project(tmp_path, ["requests==2.32.3"], python="3.11")
    run_cli("lock", cwd=project, check=0)
    lock = json.loads((project / "cudabox.lock").read_text())
    pins = {p["name"]: p for p in lock["project"]["pins"]}
    assert pins["requests"]["version"] == "2.32.3" and {"urllib3", "idna", "certifi"} <= set(pins)
    assert all(p["index"] == "https://pypi.org/simple" for p in pins.values())
    assert all(f["url"].startswith("https://files.pythonhosted.org/") and len(f["sha256"]) == 64
               for p in pins.values() for f in p["files"])
    stack = {p["name"] for p in lock["stack"]["pins"]}
    assert stack == {"nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12", "pip"} and not stack & set(pins)
    assert lock["stack"]["platform"] == "x86_64-manylinux_2_36"  # debian 12's glibc
    # the build stage's installer: PyPI's manylinux wheel of the pinned uv, by URL and sha256
    [uv_pin] = lock["stack"]["tool_pins"]
    assert uv_pin["name"] == "uv" and uv_pin["version"] == UV
    assert uv_pin["files"][0]["url"].startswith("https://files.pythonhosted.org/") and "manylinux" in \
        uv_pin["files"][0]["url"] and len(uv_pin["files"][0]["sha256"]) == 64


def test_an_index_without_the_installer_is_exit_3_saying_so(tmp_path):
    """The build installs uv from the configured index: a lock against an index that lacks it says so (not a
    Python fallback, which would not help)."""
    idx = Index(tmp_path / "index")
    for name, version in (("nvidia-cuda-runtime-cu12", "12.8.90"), ("nvidia-cuda-nvrtc-cu12", "12.8.93"),
                          ("pip", "25.3")):
        idx.add(name, version)
    project = _project(tmp_path, [], python="3.11")
    proc = run_cli("lock", cwd=project, env={"CUDABOX_PIP_INDEX_URL": idx.url})
    assert proc.returncode == 3, proc.stderr
    assert f"uv {UV}, the images' installer, can't be locked" in proc.stderr and "Python 3.10" not in proc.stderr
    assert not (project / "cudabox.lock").exists()


def test_a_git_requirement_is_locked_to_its_commit(tmp_path, uv):
    """No file to hash: the pin is the commit the branch was at; it stays until upgraded; its dependencies
    are locked (hashed) like any other; a ref the repository lacks is exit 2 naming it."""
    from cudabox.errors import InputError
    from tests.wheels import GitPackage

    idx = Index(tmp_path / "pypi")
    idx.add("helper", "1.5")
    repo = GitPackage(idx, "gitlib", requires=["helper>=1"])
    first = repo.commit("first")
    want = [f"gitlib @ {repo.url}@main"]
    pins = compile_pins(want, uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url)
    got = {p.name: p for p in pins}
    assert got["gitlib"].vcs == f"{repo.url}@{first}" and got["gitlib"].files == ()
    assert got["helper"].vcs is None and len(got["helper"].files[0][1]) == 64
    second = repo.commit("second")
    kept = compile_pins(want, uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url, previous=pins)
    assert {p.name: p.vcs for p in kept}["gitlib"].endswith(first)
    moved = compile_pins(want, uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url, previous=pins,
                         upgrade_packages=["gitlib"])
    assert {p.name: p.vcs for p in moved}["gitlib"].endswith(second)
    with pytest.raises(InputError, match="gitlib.*no-such-tag.*check the repository URL"):
        compile_pins([f"gitlib @ {repo.url}@no-such-tag"], uv=uv, python="3.11", platform=PLATFORM,
                     index_url=idx.url)


def test_a_direct_file_url_is_locked_with_its_hash(tmp_path, uv):
    idx = Index(tmp_path / "pypi")
    wheel = idx.add("helper", "1.5")
    with idx.serve() as url:
        direct = f"{url.removesuffix('/simple')}/files/{wheel.name}"
        pins = compile_pins([f"helper @ {direct}"], uv=uv, python="3.11", platform=PLATFORM, index_url=idx.url)
    import hashlib

    assert [(p.index, p.files) for p in pins] == [("direct", ((direct, hashlib.sha256(wheel.read_bytes()).hexdigest()),))]
