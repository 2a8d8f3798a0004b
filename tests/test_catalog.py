"""The image catalog: matrices/catalog.yaml -> images/ (generate, check), against the bundled matrix."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from cudabox.image import catalog
from cudabox.errors import InputError

from tests.support import REPO
from tests.test_render import apt_packages, hadolint


@pytest.fixture(scope="module")
def plan():
    return catalog.plan(catalog.catalog_matrix())


def frameworks_of(plan, name):
    return [i for i in plan.images if i.entry.framework == name]


# --------------------------------------------------------------------------- what the catalog publishes


def test_every_entry_resolves(plan):
    assert plan.failures == [], "\n".join(f"{e.label}: {why}" for e, why in plan.failures)
    paths = [i.path for i in plan.images]
    assert len(paths) == len(set(paths))


def test_catalog_covers_the_policy(plan, matrix):
    torch = frameworks_of(plan, "torch")
    minors = {".".join(i.entry.version.split(".")[:2]) for i in torch}
    newest = sorted({r.series for r in matrix.releases if r.framework == "torch"}, key=Version)[-6:]
    assert minors >= set(newest)
    for image in torch:  # every variant the matrix has for that release is published
        variants = {b.variant for b in matrix.builds_of("torch") if b.version == image.entry.version}
        published = {i.entry.variant for i in torch if i.entry.version == image.entry.version}
        assert published == variants, image.entry.version
    tf = {i.entry.version for i in frameworks_of(plan, "tensorflow")}
    with_wheels = {b.version for b in matrix.builds_of("tensorflow") if b.variant == "and-cuda"}
    newest_patch = {max((v for v in with_wheels if v.startswith(s + ".")), key=Version)
                    for s in {".".join(v.split(".")[:2]) for v in with_wheels}}
    assert tf >= newest_patch
    jax = frameworks_of(plan, "jax")
    newest_jax = max((b.version for b in matrix.builds_of("jax")), key=Version)
    assert {i.entry.variant for i in jax if i.entry.version == newest_jax} == {"cuda12", "cuda13"}
    cuda = {i.stack.cuda for i in frameworks_of(plan, "cuda")}
    released = {t.version for t in matrix.toolkits if t.major in (12, 13) and t.releases}
    assert cuda == released


def test_slim_images_carry_no_system_cuda(plan):
    for image in plan.images:
        if image.stack.flavour != "slim":
            continue
        text = plan.files[f"{image.path}/Dockerfile"]
        assert "nvidia/cuda" not in text, image.path
        packages = apt_packages(text)
        assert packages and not any(p.startswith(("cuda-", "libcudnn", "libcublas")) for p in packages), image.path


def test_tags_and_layout(plan):
    tags = {i.path for i in plan.images}
    assert any(t.startswith("cuda/cuda-12.8-py") for t in tags)
    for image in plan.images:
        flavour = "" if image.stack.flavour == "slim" else f"-{image.stack.flavour}"  # 2.6.2-cu118-py3.10-runtime
        assert image.tag.endswith(f"py{image.stack.python}{flavour}")
        stack = json.loads(plan.files[f"{image.path}/stack.json"])
        assert stack["stack_hash"] == image.stack.hash and stack["why"]
        expect = json.loads(plan.files[f"{image.path}/expect.json"])
        assert expect["stack_hash"] == image.stack.hash
        dockerfile = plan.files[f"{image.path}/Dockerfile"]
        assert f"COPY {image.path}/expect.json /opt/cudabox/expect.json" in dockerfile
        assert "COPY _support/smoke.py /opt/cudabox/smoke.py" in dockerfile
        assert "AS project" not in dockerfile
    assert [p for p in plan.files if p.endswith("smoke.py")] == ["_support/smoke.py"]
    readme = plan.files["README.md"]
    assert all(f"`{i.entry.framework}:{i.tag}`" in readme for i in plan.images)


def test_hadolint_passes_on_every_catalog_dockerfile(plan, tmp_path):
    hadolint({i.path.replace("/", "_"): plan.files[f"{i.path}/Dockerfile"] for i in plan.images}, tmp_path)


def test_plan_is_deterministic(plan):
    assert catalog.plan(catalog.catalog_matrix()).files == plan.files


def test_the_committed_images_are_current(plan):
    """What CI's `cudabox images check` asserts: regenerate with `cudabox images generate`."""
    assert catalog.differences(catalog.default_dir(), plan) == []


# --------------------------------------------------------------------------- generate / check


def test_generate_then_check_detects_changes(plan, tmp_path):
    root = tmp_path / "images"
    changes = catalog.generate(root, plan)
    assert len(changes["written"]) == len(plan.files) and not changes["deleted"]
    assert catalog.differences(root, plan) == []
    assert catalog.generate(root, plan) == {"written": [], "deleted": []}  # idempotent

    first = plan.images[0].path
    (root / first / "Dockerfile").write_text("FROM scratch\n")
    shutil.rmtree(root / plan.images[1].path)
    (root / "torch" / "0.0.1-cu000-py3.0").mkdir(parents=True)
    (root / "torch" / "0.0.1-cu000-py3.0" / "Dockerfile").write_text("stale\n")
    (root / ".gitkeep").write_text("")  # top-level dotfiles are not the catalog's
    diffs = catalog.differences(root, plan)
    assert f"modified: {first}/Dockerfile" in diffs
    assert f"missing: {plan.images[1].path}/Dockerfile" in diffs
    assert "extra: torch/0.0.1-cu000-py3.0/Dockerfile" in diffs
    assert not any(".gitkeep" in d for d in diffs)

    changes = catalog.generate(root, plan)
    assert changes["deleted"] == ["torch/0.0.1-cu000-py3.0/Dockerfile"]
    assert not (root / "torch" / "0.0.1-cu000-py3.0").exists()
    assert (root / ".gitkeep").exists()
    assert catalog.differences(root, plan) == []


def test_an_unresolvable_entry_keeps_its_published_image(plan, tmp_path, matrix):
    root = tmp_path / "images"
    catalog.generate(root, plan)
    entry = plan.images[0].entry
    broken = catalog.Entry(entry.framework, entry.version, "cu999", entry.python, where="catalog.yaml:1")
    (root / "torch" / f"{entry.version}-cu999-py{entry.python}").mkdir(parents=True)
    (root / "torch" / f"{entry.version}-cu999-py{entry.python}" / "Dockerfile").write_text("published\n")
    result = catalog.plan(matrix, [entry, broken])
    assert [e for e, _ in result.failures] == [broken]
    catalog.generate(root, result)
    assert (root / "torch" / f"{entry.version}-cu999-py{entry.python}" / "Dockerfile").exists()
    assert not any(d.endswith(f"cu999-py{entry.python}/Dockerfile") for d in catalog.differences(root, result))


def test_cli_check_and_generate(tmp_path, cli):
    root = tmp_path / "images"
    cli("images", "check", "--output", root, check=1)
    proc = cli("images", "generate", "--output", root, "--json", "--no-lock", check=0)
    out = json.loads(proc.stdout)
    assert len(out["images"]) == len(list(root.glob("*/*/Dockerfile")))
    assert set(out["unpinned"]) == set(out["images"]) and out["locked"] == []  # a fresh root, --no-lock
    assert not list(root.glob("*/*/stack-requirements.txt"))
    proc = cli("images", "check", "--output", root, "--json", check=0)
    assert set(json.loads(proc.stdout)["unpinned"]) == set(out["images"])
    victim = next(root.glob("torch/*/Dockerfile"))
    victim.write_text(victim.read_text() + "# edited\n")
    proc = cli("images", "check", "--output", root, "--json", check=1)
    assert json.loads(proc.stdout)["reasons"] == [f"modified: {victim.relative_to(root).as_posix()}"]
    proc = cli("images", "check", "--output", root, check=1)
    assert f"  - modified: {victim.relative_to(root).as_posix()}" in proc.stderr


# --------------------------------------------------------------------------- catalog.yaml


def write_catalog(tmp_path, text) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    return path


def test_catalog_entries_expand():
    entries = catalog.load_catalog()
    torch = [e for e in entries if e.framework == "torch"]
    assert torch and all(e.python == "3.12" and e.flavour == "slim" for e in torch)
    assert {e.python for e in entries if e.framework == "cuda"} == {None}  # the base's own Python
    assert any(e.extras == ("torchvision",) for e in torch)


@pytest.mark.parametrize("text,message", [
    ("torch: []\n", "missing 'source'"),
    ("source: x\nspark: []\n", "catalog.yaml:2: unknown key 'spark'"),
    ("source: x\ntorch:\n  - {version: 2.7, variants: [cu128]}\n", "must be a quoted string"),
    ("source: x\ntorch:\n  - {version: '2.7.1', variant: [cu128]}\n", "catalog.yaml:3: torch: unknown key 'variant'"),
    ("source: x\ncuda:\n  - {versions: ['12.8'], flavour: tiny}\n", "flavour 'tiny'"),
])
def test_catalog_errors_point_at_the_line(tmp_path, text, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        catalog.load_catalog(write_catalog(tmp_path, text))


def test_overlays_cannot_change_the_catalog(tmp_path, monkeypatch):
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "torch.yaml").write_text("releases: []\n")
    monkeypatch.setenv("CUDABOX_MATRICES", str(overlay))
    with pytest.raises(InputError, match="overlays"):
        catalog.catalog_matrix()


def test_repo_catalog_is_valid_yaml_with_a_source():
    assert "source:" in (REPO / "matrices" / "catalog.yaml").read_text()
    assert subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "images/README.md"]).returncode != 0


# --------------------------------------------------------------------------- locked packages


def test_published_pins_are_kept_while_the_stack_is_unchanged(plan, tmp_path, matrix):
    """The committed catalog is locked: check reads its pins (no network), and a stack that changes loses
    them (check then reports the image until generate locks it again)."""
    pinned = [i for i in plan.images if i.stack.pins]
    assert pinned and all(i.stack.tool_pins for i in pinned)
    image = next(i for i in pinned if i.entry.framework == "cuda")
    text = plan.files[f"{image.path}/Dockerfile"]
    assert f"COPY {image.path}/stack-requirements.txt /opt/cudabox/stack-requirements.txt" in text
    assert "--no-deps --require-hashes -r /opt/cudabox/stack-requirements.txt" in text
    assert "--require-hashes -r /opt/tools-requirements.txt" in text and "uv==" not in text
    lines = [line for line in plan.files[f"{image.path}/stack-requirements.txt"].splitlines()
             if not line.startswith("#")]
    assert {line.split(" @ ")[0] for line in lines} == {p.name for p in image.stack.pins}
    assert all(" --hash=sha256:" in line for line in lines)
    stack = json.loads(plan.files[f"{image.path}/stack.json"])
    assert stack["pins"] and stack["stack_hash"] == image.stack.hash  # the pins are in the stack hash

    root = tmp_path / "images"
    catalog.generate(root, plan)
    published = json.loads((root / image.path / "stack.json").read_text())
    published["requirement"] = "cuda>=99.0"  # not what the pins were resolved from (nor the smoke test)
    (root / image.path / "stack.json").write_text(json.dumps(published))
    assert catalog.plan(matrix, [image.entry], root=root).images[0].stack.pins == image.stack.pins
    published["requirements"].append("numpy==2.0.0")  # as if the matrix had changed what the stack installs
    (root / image.path / "stack.json").write_text(json.dumps(published))
    again = catalog.plan(matrix, [image.entry], root=root)
    assert again.images[0].stack.pins is None and image.path in again.unpinned
    assert again.files[f"{image.path}/Dockerfile"] != text


@pytest.mark.network
def test_generate_locks_a_new_image_against_pypi(tmp_path, matrix):
    """A new image is locked (PyPI, the only index reachable here) and keeps its pins on the next plan."""
    entry = next(e for e in catalog.load_catalog() if e.framework == "cuda" and e.version == "12.8")
    root = tmp_path / "images"
    first = catalog.plan(matrix, [entry], root=root, lock=True)
    [image] = first.images
    assert first.locked == [image.path] and not first.unpinned
    names = {p.name for p in image.stack.pins}
    assert {"nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12", "pip"} <= names
    assert all(f[0].startswith("https://files.pythonhosted.org/") and len(f[1]) == 64
               for p in image.stack.pins for f in p.files)
    catalog.generate(root, first)
    kept = catalog.plan(matrix, [entry], root=root)
    assert kept.images[0].stack.pins == image.stack.pins and not kept.unpinned
    assert catalog.differences(root, kept) == []
