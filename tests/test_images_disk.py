"""`cudabox images ls` and `images prune` on the real engine (issue 15).

Stand-ins for cudabox's images are built here (debian plus a 3 MB layer and the labels cudabox puts on
its images): a stack, the project image its current lock references, an older project image, an orphan
stack; and two images cudabox didn't build. The engine is shared with other sessions, so every prune
here is scoped with --match to this session's tags.
"""

from __future__ import annotations

import hashlib
import io
import json
import os

import pytest

from tests.docker_fixtures import BASE_IMAGE, TEST_PREFIX, docker_client  # noqa: F401
from tests.support import run_cli

pytestmark = pytest.mark.docker
BLOB = 3_000_000
NAME = f"{TEST_PREFIX}prune-{os.getpid()}"


def _fake_hash(text: str) -> str:
    return hashlib.sha256(f"{NAME}-{text}".encode()).hexdigest()


def _build(client, tag: str, base: str, labels: dict, blob: str) -> str:
    dockerfile = f"FROM {base}\nRUN head -c {BLOB} /dev/urandom > /{blob}\n"
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, labels=labels, rm=True)
    return image.id


@pytest.fixture
def setup(docker_client, tmp_path, monkeypatch):  # noqa: F811
    state = tmp_path / "xdg"
    env = {var: str(state / var.lower()) for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "cudabox.yaml").write_text(f'name: {NAME}\ncuda: "12.8"\n')
    run_cli("lock", cwd=project, env=env, check=0)  # the lock is known from now on

    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    lock = read_lock(project)
    s1, s2 = _fake_hash("s1"), _fake_hash("s2")
    tags = {"stack": f"cudabox/stack:{s1[:16]}", "project": project_tag(lock, project_dir=project),
            "old": f"cudabox/{NAME}:{'0' * 16}", "orphan": f"cudabox/stack:{s2[:16]}",
            "foreign": f"{NAME}-foreign:latest", "nolabel": f"cudabox/{NAME}-nolabel:x"}
    ids = {}
    try:
        ids["stack"] = _build(docker_client, tags["stack"], BASE_IMAGE, {"io.cudabox.stack.hash": s1}, "s1")
        project_labels = {"io.cudabox.stack.hash": s1, "io.cudabox.project": NAME}
        ids["project"] = _build(docker_client, tags["project"], tags["stack"],
                                dict(project_labels, **{"io.cudabox.lock.hash": lock.hash}), "p")
        ids["old"] = _build(docker_client, tags["old"], tags["stack"],
                            dict(project_labels, **{"io.cudabox.lock.hash": "0" * 64}), "old")
        ids["orphan"] = _build(docker_client, tags["orphan"], BASE_IMAGE, {"io.cudabox.stack.hash": s2}, "s2")
        ids["foreign"] = _build(docker_client, tags["foreign"], BASE_IMAGE, {}, "f")
        ids["nolabel"] = _build(docker_client, tags["nolabel"], BASE_IMAGE, {"io.cudabox.project": NAME}, "n")
        match = []
        for tag in tags.values():
            match += ["--match", tag]
        yield env, project, tags, ids, match
    finally:
        for tag in tags.values():
            try:
                docker_client.images.remove(tag)
            except Exception:  # noqa: BLE001 - already gone
                pass


def _present(client, tag) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def test_ls_shows_size_stack_projects_and_last_run(setup, docker_client):  # noqa: F811
    env, project, tags, ids, _ = setup
    rows = {r["image_id"]: r for r in json.loads(run_cli("images", "ls", "--json", env=env, check=0).stdout)["images"]}
    assert ids["foreign"] not in rows and ids["nolabel"] not in rows  # not cudabox's
    mine = rows[ids["project"]]
    assert mine["kind"] == "project" and mine["projects"] == [str(project.resolve())]
    assert mine["size_bytes"] > BLOB * 3 and mine["last_run"] is None
    assert rows[ids["old"]]["projects"] == [] and rows[ids["stack"]]["kind"] == "stack"

    from cudabox.lock.known import mark_run

    mark_run(ids["project"])  # what `cudabox run` records when it starts a job
    rows = {r["image_id"]: r for r in json.loads(run_cli("images", "ls", "--json", env=env, check=0).stdout)["images"]}
    assert rows[ids["project"]]["last_run"] is not None
    text = run_cli("images", "ls", env=env, check=0).stdout
    line = next(x for x in text.splitlines() if x.startswith(tags["project"]))
    assert "MB" in line and "never" not in line and str(project.resolve()).split("/")[-1] in line


def test_prune_is_a_dry_run_first_then_removes_only_unreferenced(setup, docker_client):  # noqa: F811
    env, project, tags, ids, match = setup
    dry = json.loads(run_cli("images", "prune", "--json", *match, env=env, check=0).stdout)
    assert dry["dry_run"] is True
    assert {i["image_id"] for i in dry["remove"]} == {ids["old"], ids["orphan"]}
    kept = {i["image_id"]: i["why"] for i in dry["keep"]}
    assert kept[ids["project"]] == "used by 1 project(s)" and "built on it" in kept[ids["stack"]]
    assert 2 * BLOB <= dry["freed_bytes"] < 2 * BLOB + 500_000  # their own layers, not the shared ones
    assert all(_present(docker_client, t) for t in tags.values())  # nothing removed

    done = run_cli("images", "prune", "--yes", *match, env=env, check=0)
    assert "removed 2 image(s)" in done.stdout
    assert not _present(docker_client, tags["old"]) and not _present(docker_client, tags["orphan"])
    for kept_tag in ("project", "stack", "foreign", "nolabel"):
        assert _present(docker_client, tags[kept_tag]), kept_tag


def test_prune_unused_days_and_the_lock_going_away(setup, docker_client):  # noqa: F811
    env, project, tags, ids, match = setup
    recent = json.loads(run_cli("images", "prune", "--json", "--unused-days", "1", *match, env=env,
                                check=0).stdout)
    assert ids["project"] not in {i["image_id"] for i in recent["remove"]}  # built today
    stale = json.loads(run_cli("images", "prune", "--json", "--unused-days", "0", *match, env=env,
                               check=0).stdout)
    assert {ids["project"], ids["stack"]} <= {i["image_id"] for i in stale["remove"]}
    # the project's lock goes: its image is no longer referenced
    (project / "cudabox.lock").unlink()
    run_cli("images", "prune", "--yes", *match, env=env, check=0)
    assert not _present(docker_client, tags["project"]) and not _present(docker_client, tags["stack"])
    assert _present(docker_client, tags["foreign"]) and _present(docker_client, tags["nolabel"])


def test_prune_reports_the_builder_cache_on_request(setup):
    """The reclaimable build cache is reported in the dry run (not dropped here: the engine is shared)."""
    env, _, _, _, match = setup
    plain = json.loads(run_cli("images", "prune", "--json", *match, env=env, check=0).stdout)
    assert plain["builder_cache_bytes"] is None
    dry = json.loads(run_cli("images", "prune", "--json", "--builder-cache", *match, env=env, check=0).stdout)
    assert isinstance(dry["builder_cache_bytes"], int) and dry["builder_cache_bytes"] >= 0
    text = run_cli("images", "prune", "--builder-cache", *match, env=env, check=0).stdout
    assert "MB reclaimable" in text and "run again with --yes" in text
