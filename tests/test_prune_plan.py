"""`images prune`'s decisions and its freed-space arithmetic, on made-up engine contents (pure logic;
tests/test_images_disk.py does it on the real engine)."""

from __future__ import annotations

from cudabox.image.prune import ImageInfo, freed_bytes, plan

CHAINS = {"base": (10, ("a",)), "stack": (30, ("a", "b")), "p1": (35, ("a", "b", "c")),
          "p2": (38, ("a", "b", "d")), "other": (12, ("a", "e"))}


def test_freed_bytes_counts_layers_no_remaining_image_uses():
    assert freed_bytes(CHAINS, {"p1"}) == 5
    assert freed_bytes(CHAINS, {"p1", "p2"}) == 13  # the stack stays
    assert freed_bytes(CHAINS, {"p1", "p2", "stack"}) == 33  # its 20 own bytes go too, the base's don't
    assert freed_bytes(CHAINS, {"stack"}) == 0  # images are built on it
    twin = dict(CHAINS, twin=(35, ("a", "b", "c")))  # the same layers under another ID
    assert freed_bytes(twin, {"p1"}) == 0 and freed_bytes(twin, {"p1", "twin"}) == 5


def _image(image_id, kind, stack="s1", projects=(), created=1000.0, last_run=None, containers=0, tags=None):
    return ImageInfo(image_id=image_id, tags=tags or [f"cudabox/{image_id}:x"], kind=kind, size=1, created=created,
                     stack_hash=stack, stack="", lock_hash=None, project=None, projects=list(projects),
                     last_run=last_run, containers=containers)


def test_plan_keeps_referenced_images_their_stacks_and_used_ones():
    images = [_image("new", "project", projects=["/p"]), _image("old", "project"),
              _image("s1", "stack"), _image("s2", "stack", stack="s2"),
              _image("busy", "project", stack="s3", containers=1), _image("s3", "stack", stack="s3")]
    result = plan(images, {i.image_id: (1, (i.image_id,)) for i in images}, at=2000.0)
    assert {i.image_id for i in result.remove} == {"old", "s2"}
    why = {i.image_id: w for i, w in result.keep}
    assert why == {"new": "used by 1 project(s)", "busy": "used by 1 container(s)",
                   "s1": "a kept project image is built on it", "s3": "a kept project image is built on it"}


def test_plan_unused_days_and_match():
    day = 86400.0
    images = [_image("ran", "project", projects=["/p"], created=0, last_run=10 * day),
              _image("idle", "project", stack="s2", projects=["/q"], created=0), _image("s2", "stack", stack="s2")]
    result = plan(images, {i.image_id: (1, (i.image_id,)) for i in images}, unused_days=5, at=12 * day)
    assert {i.image_id for i in result.remove} == {"idle", "s2"}  # "ran" ran 2 days ago
    scoped = plan(images, {i.image_id: (1, (i.image_id,)) for i in images}, unused_days=5, at=12 * day,
                  match=("cudabox/s2:*",))
    assert scoped.remove == []  # the stack alone would only be untagged: "idle" is still built on it
    why = dict((i.image_id, w) for i, w in scoped.keep)
    assert why["idle"] == "not matched by --match" and why["s2"] == "a kept project image is built on it"
    both = plan(images, {i.image_id: (1, (i.image_id,)) for i in images}, unused_days=5, at=12 * day,
                match=("cudabox/s2:*", "cudabox/idle:*"))
    assert {i.image_id for i in both.remove} == {"idle", "s2"}


def test_projects_are_remembered_when_their_lock_is_written_and_forgotten_when_gone(tmp_path):
    import shutil

    from cudabox.lock.known import known_projects
    from tests.support import run_cli

    by_init, by_lock = tmp_path / "a", tmp_path / "b"
    by_init.mkdir()
    by_lock.mkdir()
    run_cli("init", "--yes", "--cuda", "12.8", by_init, check=0)
    (by_lock / "cudabox.yaml").write_text('name: b\ncuda: "12.8"\n')
    run_cli("lock", cwd=by_lock, check=0)
    assert known_projects() == sorted([by_init.resolve(), by_lock.resolve()])
    (by_lock / "cudabox.lock").unlink()  # no lock: not listed (but remembered: it may come back)
    assert known_projects() == [by_init.resolve()]
    shutil.rmtree(by_init)
    assert known_projects() == []
