"""The lock is what the build installs, on a real engine: the same set twice, the locked file against an
index-confusion attempt, and a build that fails when an index serves a file whose hash isn't the locked one.

The packages come from PEP 503 indexes of tiny wheels the tests build (tests/wheels.py), served over HTTP on
the Docker bridge's address so that the build's RUN steps reach them; only uv itself comes from PyPI (the
images' pinned installer, through the host CA bundle as a build secret). The fake NVIDIA wheels carry no
CUDA, so builds run with --no-validate (the smoke test has its own tests).
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from tests.docker_fixtures import HOST_CA, cli_env, cudabox, docker_client, make_project  # noqa: F401
from tests.support import REPO
from tests.wheels import GitPackage, Index

pytestmark = pytest.mark.docker

BRIDGE = "172.17.0.1"  # docker0: where the build's RUN steps reach the host
CA = {"CUDABOX_CA_CERT": str(HOST_CA)}
LIST = ("import importlib.metadata as m, json; "
        "print(json.dumps(sorted((d.metadata['Name'].lower(), d.version) for d in m.distributions())))")


def _bridge_up() -> bool:
    try:
        with socket.socket() as s:
            s.bind((BRIDGE, 0))
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, docker_client):
    """A default index (PyPI's role) and a private one, both served over HTTP on the bridge."""
    if not _bridge_up():
        pytest.fail(f"no docker0 bridge at {BRIDGE}: the build could not reach the test indexes", pytrace=False)
    root = tmp_path_factory.mktemp("indexes")
    default, private = Index(root / "default", "default"), Index(root / "private", "private")
    default.add("nvidia-cuda-runtime-cu12", "12.8.90")
    default.add("nvidia-cuda-nvrtc-cu12", "12.8.93")
    default.add("helper", "1.5")
    default.add("pip", "25.3")  # a stand-in: the stack locks pip (the venv gets no unlocked seed packages)
    private.add("internal-lib", "1.0", requires=["helper>=1"])
    default.add("internal-lib", "9.0")  # the attacker's: same name, higher version, on a second index
    with default.serve(BRIDGE), private.serve(BRIDGE):
        yield default, private


def _installed(docker_client, image: str) -> dict:
    out = docker_client.containers.run(image, ["/opt/venv/bin/python", "-c", LIST], remove=True)
    return dict(json.loads(out))


def _locked(project: Path) -> dict:
    lock = json.loads((project / "cudabox.lock").read_text())
    return {p["name"]: p["version"] for part in ("stack", "project") for p in lock[part]["pins"]}


# After lock, nothing may load the compatibility matrix: a matrices directory with frameworks.yaml alone (the
# framework declarations, which cudabox.yaml's validation reads for its did-you-mean since #14; see the report)
_ONLY_FRAMEWORKS = Path(tempfile.mkdtemp(prefix="cudabox-no-matrix-"))
shutil.copy(REPO / "matrices" / "frameworks.yaml", _ONLY_FRAMEWORKS / "frameworks.yaml")
NO_MATRIX = {"CUDABOX_BUNDLED_MATRICES": str(_ONLY_FRAMEWORKS)}


def _build(project, env, *args, check=0):
    proc = cudabox("build", "--json", "--no-validate", *args, cwd=project, env=env, extra_env=dict(CA, **NO_MATRIX))
    assert proc.returncode == check, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc


def _cleanup(docker_client, *tags):
    for tag in tags:
        try:
            docker_client.images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


def test_two_builds_of_one_lock_install_the_locked_set(indexes, tmp_path, docker_client, cli_env):
    default, private = indexes
    project = make_project(tmp_path / "p", f"""name: cb-test-locked
python: "3.11"
cuda: "12.8"
requirements: [internal-lib]
extra_index_urls: ["{private.url}", "{default.url}"]
""", cli_env)
    locked = _locked(project)
    # first-index: the private index has internal-lib, so it comes from there, never the other index's 9.0
    # (PyPI, the default index, is asked for nothing: each package is found on the first index that has it;
    # the build's uv stage still installs uv itself from PyPI)
    assert locked["internal-lib"] == "1.0" and locked["helper"] == "1.5"
    pins = {p["name"]: p for p in json.loads((project / "cudabox.lock").read_text())["project"]["pins"]}
    assert pins["internal-lib"]["index"] == private.url and "/private/" not in pins["helper"]["files"][0]["url"]

    # later: newer versions everywhere, the attacker's on both indexes; the build doesn't resolve, so no matter
    private.add("internal-lib", "10.0")
    default.add("internal-lib", "11.0")
    default.add("helper", "2.0")
    first = json.loads(_build(project, cli_env).stdout)
    try:
        got = _installed(docker_client, first["image"])
        for name, version in locked.items():
            assert got.get(name) == version, (name, got.get(name), version)
        where = docker_client.containers.run(first["image"], ["/opt/venv/bin/python", "-c",
                                                              "import internal_lib as m; print(m.WHERE)"], remove=True)
        assert where.decode().strip() == "private"
        # a second build of the same lock, nothing from the cache: the same set
        second = json.loads(_build(project, cli_env, "--no-cache").stdout)
        assert _installed(docker_client, second["image"]) == got
        # every step after lock reads the lock alone: with no matrix at all, run, validate and export still work
        ran = cudabox("run", "--gpus", "none", "--", "python", "-c", "import internal_lib; print(internal_lib.WHERE)",
                      cwd=project, env=cli_env, extra_env=NO_MATRIX)
        assert ran.returncode == 0 and ran.stdout.strip() == "private", ran.stderr
        checked = cudabox("validate", "--no-gpu", cwd=project, env=cli_env, extra_env=NO_MATRIX)
        assert checked.returncode in (0, 1, 4) and "matrices" not in checked.stderr  # fake CUDA: checks may fail
        for export in (["export", "k8s"], ["export", "slurm"]):
            out = cudabox(*export, "--", "python", "x.py", cwd=project, env=cli_env, extra_env=NO_MATRIX)
            assert out.returncode == 0, out.stderr
    finally:
        _cleanup(docker_client, first["image"], first["stack"]["image"])


def test_a_file_that_is_not_the_locked_one_fails_the_build(indexes, tmp_path, docker_client, cli_env):
    default, _ = indexes
    default.add("victim", "1.0")
    project = make_project(tmp_path / "t", f"""name: cb-test-tampered
python: "3.11"
cuda: "12.8"
requirements: ["victim==1.0"]
extra_index_urls: ["{default.url}"]
""", cli_env)
    import hashlib

    locked_sha = json.loads((project / "cudabox.lock").read_text())["project"]["pins"][0]["files"][0]["sha256"]
    wheel = default.add("victim", "1.0", where="tampered")  # same file name, other content: the index serves this
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() != locked_sha
    proc = _build(project, cli_env, check=1)
    error = json.loads(proc.stdout)
    said = " ".join([error["error"]] + error["reasons"]).lower()
    assert "hash mismatch" in said and "victim" in said, proc.stdout
    lock = json.loads((project / "cudabox.lock").read_text())
    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    assert not docker_client.images.list(name=project_tag(read_lock(project), project_dir=project).split(":")[0])  # nothing tagged
    _cleanup(docker_client, f"cudabox/stack:{lock['stack_hash'][:16]}")


def test_a_git_requirement_is_built_at_its_locked_commit(indexes, tmp_path, docker_client, cli_env):
    """`pkg @ git+URL@main` is locked to the commit main was at; a later commit on main changes no build until
    `lock -P pkg`; its dependencies are locked and hashed like any other package."""
    default, _ = indexes
    repo = GitPackage(default, "gitlib", requires=["helper>=1"])
    first = repo.commit("first")
    project = make_project(tmp_path / "g", f"""name: cb-test-gitpin
python: "3.11"
cuda: "12.8"
requirements: ["gitlib @ {repo.url}@main"]
extra_index_urls: ["{default.url}"]
""", cli_env)
    pins = {p["name"]: p for p in json.loads((project / "cudabox.lock").read_text())["project"]["pins"]}
    assert pins["gitlib"]["vcs"] == f"{repo.url}@{first}" and pins["gitlib"]["files"] == []
    assert pins["helper"]["files"][0]["sha256"]  # the git package's dependency: hashed
    second = repo.commit("second")
    assert cudabox("lock", cwd=project, env=cli_env).returncode == 0  # unchanged inputs keep the commit
    assert json.loads((project / "cudabox.lock").read_text())["project"]["pins"][0]["vcs"].endswith(first)
    built = json.loads(_build(project, cli_env).stdout)
    who = "import gitlib, helper; print(gitlib.WHO, helper.__version__)"
    images = [built["image"]]
    try:
        out = docker_client.containers.run(built["image"], ["/opt/venv/bin/python", "-c", who], remove=True)
        assert out.decode().split() == ["first", "1.5"]  # the locked commit, not main's tip
        moved = cudabox("lock", "-P", "gitlib", cwd=project, env=cli_env)
        assert moved.returncode == 0, moved.stderr
        assert json.loads((project / "cudabox.lock").read_text())["project"]["pins"][0]["vcs"].endswith(second)
        rebuilt = json.loads(_build(project, cli_env).stdout)
        images.append(rebuilt["image"])
        assert rebuilt["stack"]["reused"] is True  # a project pin: the stack image stays
        out = docker_client.containers.run(rebuilt["image"], ["/opt/venv/bin/python", "-c", who], remove=True)
        assert out.decode().split() == ["second", "1.5"]
    finally:
        _cleanup(docker_client, *images, built["stack"]["image"])


def test_a_git_ref_that_does_not_exist_is_exit_2_naming_it(indexes, tmp_path, cli_env):
    default, _ = indexes
    repo = GitPackage(default, "gitnoref")
    repo.commit("only")
    (tmp_path / "cudabox.yaml").write_text(f"""name: cb-test-gitref
python: "3.11"
cuda: "12.8"
requirements: ["gitnoref @ {repo.url}@no-such-branch"]
extra_index_urls: ["{default.url}"]
""")
    proc = cudabox("lock", cwd=tmp_path, env=cli_env)
    assert proc.returncode == 2, proc.stderr
    assert "gitnoref" in proc.stderr and "no-such-branch" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "cudabox.lock").exists()
