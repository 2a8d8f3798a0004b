"""The lock is the contract: what goes into the stack image is in the stack hash, and no step after `lock`
loads the matrix (no engine needed here; tests/test_lock_build.py runs build, validate and run without one)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cudabox.errors import InputError
from tests.support import REPO, run_cli
from tests.test_lock_packages import _plain_index, _project


def _stack(matrix):
    from cudabox.lock.resolution import resolve_project
    from cudabox.project.spec import spec_from_flags

    return resolve_project(spec_from_flags(Path("."), [], cuda="==12.8.*", python="==3.11.*"), matrix=matrix,
                           no_host=True).stack


def test_every_stack_image_input_changes_the_stack_hash(matrix, monkeypatch, tmp_path):
    """A stale stack image is never reused: the uv pin, the smoke thresholds and smoke.py are in the hash."""
    from cudabox import paths
    from cudabox.resolve.facts import build_inputs

    stack = _stack(matrix)
    assert stack.tools == {"uv": matrix.tools["uv"].version}
    assert stack.smoke["source_sha256"] == hashlib.sha256(paths.smoke_file().read_bytes()).hexdigest()
    assert {"gemm_pass", "bandwidth_pass"} <= set(stack.smoke)
    hashes = {stack.hash}
    for change in ({"tools": {"uv": "0.0.1"}}, {"smoke": dict(stack.smoke, gemm_pass=0.01)},
                   {"smoke": dict(stack.smoke, source_sha256="0" * 64)}):
        hashes.add(replace(stack, **change).hash)
    assert len(hashes) == 4
    # a changed smoke.py: the next lock has another stack hash, and the old lock can't be rendered with it
    edited = tmp_path / "smoke.py"
    edited.write_text(paths.smoke_file().read_text() + "\n# changed\n")
    monkeypatch.setattr(paths, "smoke_file", lambda: edited)
    assert build_inputs(matrix)[1]["source_sha256"] != stack.smoke["source_sha256"]
    assert _stack(matrix).hash != stack.hash
    from cudabox.image.render import render

    with pytest.raises(InputError, match="smoke test .* changed since cudabox.lock"):
        render(replace(stack, pins=()))


def test_lock_check_sees_a_changed_uv_pin(tmp_path):
    idx = _plain_index(tmp_path)
    project = _project(tmp_path, [], python="3.11")
    env = {"CUDABOX_PIP_INDEX_URL": idx.url}
    run_cli("lock", cwd=project, env=env, check=0)
    run_cli("lock", "--check", cwd=project, env=env, check=0)
    matrices = tmp_path / "matrices"
    shutil.copytree(REPO / "matrices", matrices)
    images = matrices / "images.yaml"
    images.write_text(images.read_text().replace('{name: uv, version: "0.13.9"', '{name: uv, version: "0.13.8"'))
    proc = run_cli("lock", "--check", cwd=project, env=dict(env, CUDABOX_BUNDLED_MATRICES=str(matrices)))
    assert proc.returncode == 1 and "uv" in proc.stderr and "0.13.8" in proc.stderr


def test_nothing_after_lock_loads_the_matrix(tmp_path, monkeypatch):
    """Lock with the matrix, then take it away: render, export (k8s, Slurm) and the driver check still work."""
    idx = _plain_index(tmp_path)
    project = _project(tmp_path, [], python="3.11")
    (project / "cudabox.yaml").write_text((project / "cudabox.yaml").read_text() + "gpus: [A100]\n")
    run_cli("lock", cwd=project, env={"CUDABOX_PIP_INDEX_URL": idx.url}, check=0)
    gone = {"CUDABOX_BUNDLED_MATRICES": str(tmp_path / "no-matrices")}
    assert "no-matrices/" in run_cli("resolve", cwd=project, env=gone).stderr  # the loader really fails
    for args in (["dockerfile"], ["export", "k8s", "--", "python", "x.py"], ["export", "slurm", "--", "true"]):
        proc = run_cli(*args, cwd=project, env=gone)
        assert proc.returncode == 0, (args, proc.stderr)
    from cudabox.knowledge import loader
    from cudabox.jobs.run import driver_problem
    from cudabox.lock.fit import Gpu
    from cudabox.lock.lockfile import read_lock

    monkeypatch.setattr(loader, "load", lambda *a, **k: pytest.fail("the matrix was loaded after lock"))
    lock = read_lock(project)
    assert driver_problem(lock.stack, "575.51.03", [Gpu("A100", "8.0")]) is None
    assert "570.26" in driver_problem(lock.stack, "550.54.15")


def test_run_tells_a_fresh_lock_by_the_bytes_of_its_inputs(tmp_path, monkeypatch):
    """`cudabox run`'s everyday check parses no YAML: the lock is fresh when cudabox.yaml and the files it
    references have the bytes they had; any change (or an old lock without per-file hashes) re-reads the spec."""
    from cudabox.jobs.run import fresh_lock
    from cudabox.lock import lockfile
    from cudabox.project import spec as spec_mod

    assert lockfile.SPEC_INPUT == spec_mod.SPEC_FILE
    project = tmp_path / "project"
    (project / "reqs").mkdir(parents=True)
    (project / "cudabox.yaml").write_text('name: demo\ncuda: "12.8"\nrequirements_file: requirements.txt\n')
    (project / "requirements.txt").write_text("-r reqs/base.txt\n")
    (project / "reqs" / "base.txt").write_text("einops\n")
    run_cli("lock", "--no-packages", cwd=project, env={"CUDABOX_NO_HOST": "1"}, check=0)
    lock = lockfile.read_lock(project)
    assert [name for name, _ in lock.inputs] == ["cudabox.yaml", "requirements.txt", "reqs/base.txt"]
    assert lockfile.inputs_unchanged(lock, project)
    real = spec_mod.load_spec
    monkeypatch.setattr(spec_mod, "load_spec", lambda *a, **k: pytest.fail("cudabox.yaml was parsed"))
    assert fresh_lock(project) == lock
    monkeypatch.setattr(spec_mod, "load_spec", real)
    base = project / "reqs" / "base.txt"
    base.write_text("einops\n# a comment\n")  # an included file changed: not fresh by bytes
    assert not lockfile.inputs_unchanged(lock, project)
    base.write_text("einops\n")
    assert lockfile.inputs_unchanged(lock, project)
    base.unlink()
    base.symlink_to("/dev/zero")  # unreadable as an input: "not known", never an error or a hang here
    assert not lockfile.inputs_unchanged(lock, project)
    assert not lockfile.inputs_unchanged(replace(lock, inputs=()), project)  # a lock from before per-file hashes
    assert not lockfile.inputs_unchanged(replace(lock, inputs=lock.inputs[1:]), project)
