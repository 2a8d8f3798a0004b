"""`cudabox matrix refresh` (issue 8): derivation from recorded PyPI metadata, the bundled data against
PyPI, overlays the resolver picks up, and the client's network manners (on a real local HTTP server).

Recorded responses live in tests/fixtures/pypi (re-record with tests/fixtures/pypi/record.py).
Releases newer than anything real are synthesised by `synthetic_pypi` below and say so.
"""

from __future__ import annotations

import io
import json
import shutil
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudabox import paths
from cudabox.knowledge import check as matrix_check
from cudabox.knowledge import loader, overlay
from cudabox.knowledge.pypi import Client, FixtureTransport, HTTPTransport
from cudabox.knowledge.refresh.index import pytorch_pythons, pytorch_variants, pytorch_wheels
from cudabox.knowledge.refresh.reader import (
    companion_pin,
    jax_plugin_pins,
    jax_plugins,
    newer_releases,
    plugin_names,
    plain,
    projects_for,
    releases,
    tf_and_cuda,
    torch_pins,
)
from cudabox.knowledge.refresh.write import run
from tests.support import REPO, run_cli

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pypi"

# Bundled records that disagree with PyPI's metadata, reported to the maintainers. The test below
# fails when one of them is fixed: then delete the entry.
KNOWN_DISAGREEMENTS: dict = {}  # (package, version) -> why; empty: the bundled pins equal PyPI's


@pytest.fixture(scope="module")
def pypi(tmp_path_factory):
    return Client(FixtureTransport(FIXTURES), cache_dir=tmp_path_factory.mktemp("pypi-cache"))


def bundled_docs() -> dict:
    return overlay.load_documents(None, REPO / "matrices")


JAX = plugin_names(bundled_docs()["frameworks"], "jax")  # jax[cudaNN] -> jax-cudaNN-plugin (frameworks.yaml)


def requires(client: Client, name: str, version: str) -> list[str]:
    rel = releases(client.project(name))[version]
    return client.metadata(name, version, rel.wheel).requires_dist


def bundled(subject: str) -> dict:
    return yaml.safe_load((REPO / "matrices" / f"{subject}.yaml").read_text())


def same_spec(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    norm = (lambda s: s if s[0] in "=<>!~" else f"=={s}")
    return SpecifierSet(norm(str(a))) == SpecifierSet(norm(str(b)))


# --------------------------------------------------------------------------- derivation (issue's examples)


def test_torch_2_4_1_pins_cuda_12_1_and_cudnn_9_1_0_70(pypi):
    assert torch_pins(requires(pypi, "torch", "2.4.1")) == {
        "variant": "cu121", "cuda": "12.1", "cuda_runtime": "12.1.105", "cudnn": "9.1.0.70"}


def test_torch_2_11_0_pins_cuda_13_0_via_cuda_toolkit_and_cudnn_cu13(pypi):
    deps = requires(pypi, "torch", "2.11.0")
    assert torch_pins(deps) == {"variant": "cu130", "cuda": "13.0", "cuda_runtime": "13.0.2", "cudnn": "9.19.0.56"}
    assert any(d.startswith("nvidia-cudnn-cu13==9.19.0.56") for d in deps)


def test_jax_0_6_0_needs_cudnn_9_8(pypi):
    plugins = jax_plugins(requires(pypi, "jax", "0.6.0"), JAX)
    assert set(plugins) == {"cuda12"} and "0.6.0" in plugins["cuda12"]
    assert jax_plugin_pins(requires(pypi, "jax-cuda12-plugin", "0.6.0")) == {"cudnn": ">=9.8,<10", "cuda_min": "12.1"}


def test_tensorflow_2_15_1_and_cuda_pins_cuda_12_2_cudnn_8_9_4_25(pypi):
    assert tf_and_cuda(requires(pypi, "tensorflow", "2.15.1")) == {
        "cuda_major": 12, "cuda_runtime": "==12.2.140", "cudnn": "==8.9.4.25"}


def test_more_derivations(pypi):
    assert torch_pins(requires(pypi, "torch", "1.12.1"))["variant"] is None  # bundles CUDA: no nvidia-* deps
    assert torch_pins(requires(pypi, "torch", "1.13.1"))["variant"] == "cu117"  # old "(==x) ; marker" syntax
    assert companion_pin(requires(pypi, "torchvision", "0.19.1")) == "==2.4.1"
    assert companion_pin(requires(pypi, "torchaudio", "2.11.0")) is None
    assert tf_and_cuda(requires(pypi, "tensorflow", "2.13.0")) is None  # before [and-cuda]
    assert tf_and_cuda(requires(pypi, "tensorflow", "2.20.0")) == {
        "cuda_major": 12, "cuda_runtime": ">=12.5.82,<13", "cudnn": ">=9.3.0.75,<10"}
    assert jax_plugin_pins(requires(pypi, "jax-cuda13-plugin", "0.7.2")) == {
        "cudnn": ">=9.12.0.46,<10", "cuda_min": "13.0"}
    assert jax_plugin_pins(requires(pypi, "jax-cuda12-plugin", "0.4.31"))["cudnn"] == ">=9.1,<10"  # "with_cuda"


@pytest.mark.parametrize("edit,selected,expected", [
    (None, ["jax"], ["jax", "jaxlib", "jax-cuda11-plugin", "jax-cuda12-plugin", "jax-cuda13-plugin"]),
    ("cuda14", ["jax"], ["jax", "jaxlib", "jax-cuda11-plugin", "jax-cuda12-plugin", "jax-cuda13-plugin",
                         "jax-cuda14-plugin"]),  # a new CUDA major in cuda.yaml is all a new plugin needs
    ("no-plugin-package", ["jax"], ["jax", "jaxlib"]),
    (None, ["torch", "torchvision"], ["torch", "torchvision"]),
])
def test_the_projects_refresh_reads_come_from_the_data(edit, selected, expected):
    docs = {k: plain(v) for k, v in bundled_docs().items()}
    if edit == "cuda14":
        docs["cuda"]["majors"].append(dict(docs["cuda"]["majors"][-1], major=14))
    elif edit == "no-plugin-package":
        next(r for r in docs["frameworks"]["frameworks"] if r["name"] == "jax").pop("plugin_package")
    got = projects_for(selected, docs, ("nvidia-cudnn-cu12",))
    assert got == expected + ["nvidia-cudnn-cu12", "cuda-toolkit"]


def test_jax_extras_map_to_their_plugin_projects():
    assert [JAX.project(e) for e in ("cuda12", "cuda13", "cuda14", "cuda12_pip", "cpu")] == \
        ["jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda14-plugin", None, None]
    deps = ['jax-cuda14-plugin==0.20.0; extra == "cuda14"', 'jax-cuda12-plugin[with-cuda]==0.20.0; extra == "cuda12"',
            'jaxlib==0.20.0; extra == "cuda12_local"']
    assert {k: str(v) for k, v in jax_plugins(deps, JAX).items()} == {"cuda14": "==0.20.0", "cuda12": "==0.20.0"}


def test_release_facts_from_the_project_json(pypi):
    torch = releases(pypi.project("torch"))
    assert torch["2.15.0"].pythons == ("3.11", "3.12", "3.13", "3.14", "3.15")  # cp314t/cp315t left out
    assert torch["2.4.1"].uploaded == "2024-09-04"
    assert releases(pypi.project("torchaudio"))["2.0.0"].yanked
    assert "2.15.0.post1" not in releases(pypi.project("tensorflow"))  # not a version the matrix can spell


def test_pytorch_index_page_parsing():
    html = ('<a href="/whl/cu121/torch-2.4.1%2Bcu121-cp310-cp310-linux_x86_64.whl#sha256=0">'
            'torch-2.4.1+cu121-cp310-cp310-linux_x86_64.whl</a>\n'
            '<a href="x">torch-2.4.1+cu124-cp312-cp312-manylinux_2_28_x86_64.whl</a>\n'
            '<a href="x">torch-2.4.1+cu118-cp310-cp310-win_amd64.whl</a>\n'
            '<a href="x">torch-2.4.1+cpu-cp310-cp310-linux_x86_64.whl</a>\n')
    assert pytorch_variants(html) == {"2.4.1": {"cu121", "cu124"}}


INDEX = Path(__file__).resolve().parent / "fixtures" / "pytorch-index" / "torch.html"


def test_pytorch_index_wheel_names_carry_version_variant_python_and_platform():
    wheels = pytorch_wheels(INDEX.read_text())
    w = next(w for w in wheels if w.version == "2.4.1" and w.variant == "cu118" and w.platform == "win_amd64")
    assert (w.python, w.free_threaded, w.linux_x86_64) == ("3.12", False, False)
    assert pytorch_variants(INDEX.read_text()) == {"2.4.1": {"cu118", "cu121", "cu124"},  # no cpu, no rocm
                                                   "2.16.0": {"cu126", "cu130", "cu132"}}
    pythons = pytorch_pythons(INDEX.read_text())
    assert pythons[("2.4.1", "cu121")] == ["3.8", "3.9", "3.10", "3.11", "3.12"]
    assert pythons[("2.16.0", "cu130")] == ["3.11", "3.12", "3.13", "3.14"]  # cp314t left out
    assert pythons[("2.16.0", "cu132")] == ["3.11", "3.12", "3.13", "3.14"]  # the aarch64 wheel doesn't count


RECORDED_INDEX = Path(__file__).resolve().parent / "fixtures" / "pytorch-index-recorded"  # see its README.md


def test_a_recorded_pytorch_index_page(tmp_path):
    """The one real page excerpt found (luocfprime/tiny-torch-mirror), read as refresh reads the index:
    what it derives must be a subset of the bundled torch records (5 anchors of thousands)."""
    client = Client(FixtureTransport(RECORDED_INDEX), cache_dir=tmp_path)
    html = client.fetch("https://download.pytorch.org/whl/cu117/torch/", quick=True).decode()
    variants, pythons = pytorch_variants(html), pytorch_pythons(html)
    assert variants == {"1.13.0": {"cu117"}}  # the Windows cu117 and untagged aarch64 wheels don't count
    assert pythons == {("1.13.0", "cu117"): ["3.7"]}
    assert {(w.version, w.variant, w.platform) for w in pytorch_wheels(html) if not w.linux_x86_64} == {
        ("1.13.0", "cu117", "win_amd64"), ("2.0.1", None, "manylinux2014_aarch64")}
    torch = {r["series"]: r for r in bundled("torch")["releases"]}
    for version, names in variants.items():
        record = torch[".".join(version.split(".")[:2])]
        assert version in record["versions"] and names <= {v["name"] for v in record["variants"]}
        for name in names:
            own = next(v for v in record["variants"] if v["name"] == name).get("python") or record["python"]
            assert set(pythons[(version, name)]) <= set(own)


def test_refresh_reads_the_pytorch_index_when_reachable(synthetic_pypi):
    (synthetic_pypi / "pytorch-index").mkdir()
    shutil.copy(INDEX, synthetic_pypi / "pytorch-index" / "torch.html")
    plan, lines, written = run(Client(FixtureTransport(synthetic_pypi)), ["torch"])
    record = next(c.new for c in plan.changes if c.subject == "torch" and c.new.get("series") == "2.16")
    assert [v["name"] for v in record["variants"]] == ["cu126", "cu130", "cu132"]
    listed = next(v for v in record["variants"] if v["name"] == "cu126")
    assert "https://download.pytorch.org/whl/torch/" in listed["source"]
    assert listed["note"].startswith("listed on download.pytorch.org; cuDNN and arch lists carried")
    assert not any("could not read https://download.pytorch.org" in n for n in plan.notes)
    # cu126 has no 3.14 wheel on the index while PyPI's (cu132) wheels go to 3.14: cu126 gets its own list
    assert listed["python"] == ["3.11", "3.12", "3.13"] and record["python"] == ["3.11", "3.12", "3.13", "3.14"]
    assert [v.get("python") for v in record["variants"]] == [["3.11", "3.12", "3.13"], None, None]
    assert not [c.label for c in plan.changes if c.label == "torch 2.4"]  # 2.4.1's variants: every series Python
    assert any("(cu126 Python 3.11-3.13: its wheels there)" in line for line in lines), lines
    builds = {b.variant: b.python.versions for b in loader.load().builds_of("torch") if b.version == "2.16.0"}
    assert builds == {"cu126": ("3.11", "3.12", "3.13"), "cu130": ("3.11", "3.12", "3.13", "3.14"),
                      "cu132": ("3.11", "3.12", "3.13", "3.14")} and [p.name for p in written] == ["torch.yaml"]


def _index_page(rows) -> str:
    """A simple page with one Linux x86_64 wheel per (version, variant, cpXY) row."""
    links = [f'<a href="/whl/{v}/torch-{ver}%2B{v}-cp{py}-cp{py}-linux_x86_64.whl">'
             f'torch-{ver}+{v}-cp{py}-cp{py}-linux_x86_64.whl</a><br/>' for ver, v, py in rows]
    return "<html><body><h1>Links for torch</h1>\n" + "\n".join(links) + "\n</body></html>\n"


ALL_24 = ["38", "39", "310", "311", "312"]  # torch 2.4's series Python list (PyPI): 3.8-3.12


def _rows(variants=("cu118", "cu121", "cu124"), versions=("2.4.0", "2.4.1"), pythons=ALL_24):
    return [(ver, v, py) for ver in versions for v in variants for py in pythons]


@pytest.mark.parametrize("rows,edit,expected", [
    (_rows(), None, None),  # every variant has the series' Pythons: nothing to write
    (_rows(("cu121", "cu124")) + _rows(("cu118",), pythons=ALL_24[1:]), None,
     {"cu118": ["3.9", "3.10", "3.11", "3.12"]}),  # cu118 lacks 3.8 there: its own list
    (_rows(("cu121", "cu124")) + _rows(("cu118",), ("2.4.0",)) + _rows(("cu118",), ("2.4.1",), ALL_24[:-1]), None,
     {"cu118": ["3.8", "3.9", "3.10", "3.11"]}),  # what every version of the series has
    (_rows(("cu118", "cu124")) + _rows(("cu121",), pythons=ALL_24[1:]), None, None),  # cu121 is PyPI's: its list
    ([("2.5.1", "cu124", "312")], None, None),  # the index lists no 2.4 wheel: left as it is
    (_rows(), {"cu124": ["3.9"]}, {"cu124": None}),  # a list the index contradicts is removed
])
def test_refresh_writes_a_variant_python_list_from_the_index(tmp_path, rows, edit, expected):
    from tests.test_completeness import _plain, bundled_docs as docs_of
    from cudabox.knowledge.refresh.plan import plan

    root = tmp_path / "pypi"
    shutil.copytree(FIXTURES, root)
    (root / "pytorch-index").mkdir()
    (root / "pytorch-index" / "torch.html").write_text(_index_page(rows))
    docs = _plain(docs_of())
    record = next(r for r in docs["torch"]["releases"] if r["series"] == "2.4")
    for name, python in (edit or {}).items():
        next(v for v in record["variants"] if v["name"] == name)["python"] = python
    result = plan(Client(FixtureTransport(root), cache_dir=tmp_path / "cache"), docs, ["torch"])
    change = next((c for c in result.changes if c.label == "torch 2.4"), None)
    if expected is None:
        assert change is None, change and change.new
        return
    assert change is not None and not change.adds()  # a correction, no new release
    for name, python in expected.items():
        variant = next(v for v in change.new["variants"] if v["name"] == name)
        assert variant.get("python") == python
        if python:
            assert "https://download.pytorch.org/whl/torch/" in variant["source"]
    assert not any("could not read" in n for n in result.notes)


def test_an_unreadable_index_is_not_said_when_no_new_series_needs_it(pypi):
    from tests.test_completeness import bundled_docs as docs_of
    from cudabox.knowledge.refresh.plan import plan

    result = plan(pypi, docs_of(), ["torch"])  # the recorded fixtures have no index page
    assert result.changes == [] and not any("download.pytorch.org" in n for n in result.notes)


# --------------------------------------------------------------------------- the bundled data equals PyPI


def _check(mismatches: dict) -> None:
    unexpected = {k: v for k, v in mismatches.items() if k not in KNOWN_DISAGREEMENTS}
    assert not unexpected, "bundled pins differ from PyPI:\n" + "\n".join(f"{k}: {v}" for k, v in unexpected.items())


def test_bundled_torch_pins_equal_pypi(pypi):
    bad = {}
    for rec in bundled("torch")["releases"]:
        default = next((v for v in rec["variants"] if v["name"] == rec["pypi_default"]), None)
        for version in rec["versions"]:
            got = torch_pins(requires(pypi, "torch", version))
            want = {"variant": rec["pypi_default"], "cuda_runtime": rec["pypi"]["cuda_runtime"],
                    "cudnn": rec["pypi"]["cudnn"]}
            if {k: got[k] for k in want} != want:
                bad[("torch", version)] = f"bundled {want}, PyPI {got}"
            if default and default["cudnn"] != got["cudnn"]:
                bad[("torch", version, default["name"])] = f"variant cuDNN {default['cudnn']}, PyPI {got['cudnn']}"
    _check(bad)


def test_bundled_companion_pins_equal_pypi(pypi):
    bad = {}
    for name, records in bundled("torch")["companions"].items():
        for rec in records:
            got = companion_pin(requires(pypi, name, rec["version"]))
            if not same_spec(rec["torch"], got):
                bad[(name, rec["version"])] = f"bundled {rec['torch']}, PyPI {got}"
    assert set(bad) == {k for k in KNOWN_DISAGREEMENTS if k[0] in ("torchvision", "torchaudio")}, \
        f"bundled companion pins vs PyPI: {bad} (expected only {KNOWN_DISAGREEMENTS})"


def test_bundled_tensorflow_pins_equal_pypi(pypi):
    bad = {}
    for rec in bundled("tensorflow")["releases"]:
        for version in rec["versions"]:
            got, want = tf_and_cuda(requires(pypi, "tensorflow", version)), rec["and_cuda"]
            same = (got is None and want is None) or (got and want and got["cuda_major"] == want["cuda_major"] and
                                                      same_spec(got["cuda_runtime"], want["cuda_runtime"]) and
                                                      same_spec(got["cudnn"], want["cudnn"]))
            if not same:
                bad[("tensorflow", version)] = f"bundled {want}, PyPI {got}"
    _check(bad)


def test_bundled_jax_plugin_pins_equal_pypi(pypi):
    bad = {}
    plugin_releases = {n: releases(pypi.project(JAX.project(n))) for n in ("cuda12", "cuda13")}
    jaxlib = releases(pypi.project("jaxlib"))
    for rec in bundled("jax")["releases"]:
        # jax is pure Python: a record's Pythons are the jaxlib wheel tags all its versions share
        # (Requires-Python where a jax release has no jaxlib of its own)
        tags = [set(jaxlib[v].pythons) for v in rec["versions"] if v in jaxlib]
        if tags and sorted(set.intersection(*tags), key=Version) != rec["python"]:
            bad[("jax", "/".join(rec["versions"]), "python")] = f"jaxlib wheel tags differ from {rec['python']}"
        for version in rec["versions"]:
            deps = requires(pypi, "jax", version)
            if not tags and pypi.metadata("jax", version, releases(pypi.project("jax"))[version].wheel) \
                    .requires_python != rec["python"]:
                bad[("jax", version, "python")] = "Requires-Python differs"
            found = {}
            for extra, spec in jax_plugins(deps, JAX).items():
                matches = [v for v in plugin_releases[extra] if v in spec]
                if matches:
                    found[extra] = jax_plugin_pins(requires(pypi, JAX.project(extra), matches[-1]))
                    if found[extra]["cudnn"] is None:  # jax <= 0.4.28 pins the nvidia-* wheels in its own extra
                        found[extra] = jax_plugin_pins(deps, extra)
            if set(found) != {p["name"] for p in rec["plugins"]}:
                bad[("jax", version)] = f"plugins {sorted(found)} on PyPI"
            for plugin in rec["plugins"]:
                got = found.get(plugin["name"])
                if got and not (same_spec(got["cudnn"], plugin["cudnn"]) and got["cuda_min"] == plugin["cuda_min"]):
                    bad[("jax", version, plugin["name"])] = f"bundled {plugin['cudnn']}, PyPI {got}"
    _check(bad)


def test_known_disagreements_still_disagree(pypi):
    """When the maintainers fix one, this says which entry of KNOWN_DISAGREEMENTS to delete."""
    for (name, version), what in KNOWN_DISAGREEMENTS.items():
        rec = next(r for r in bundled("torch")["companions"][name] if r["version"] == version)
        assert not same_spec(rec["torch"], companion_pin(requires(pypi, name, version))), \
            f"{name} {version} is fixed: delete it from KNOWN_DISAGREEMENTS"


# --------------------------------------------------------------------------- refresh -> overlay -> resolve


SYNTHETIC = "SYNTHETIC release made by tests/test_refresh.py (not on PyPI)"


@pytest.fixture
def synthetic_pypi(tmp_path) -> Path:
    """The recorded fixtures plus torch 2.16.0 / torchvision 0.30.0, newer than the bundled data."""
    root = tmp_path / "pypi"
    shutil.copytree(FIXTURES, root)
    wheels = {"torch": [f"torch-2.16.0-{t}-manylinux_2_28_x86_64.whl" for t in
                        ("cp311-cp311", "cp312-cp312", "cp313-cp313", "cp314-cp314", "cp314-cp314t")],
              "torchvision": ["torchvision-0.30.0-cp312-cp312-manylinux_2_28_x86_64.whl"]}
    versions = {"torch": "2.16.0", "torchvision": "0.30.0"}
    deps = {"torch": ["Requires-Python: >=3.11",
                      'Requires-Dist: cuda-toolkit[cudart,cublas]==13.2.2; platform_system == "Linux"',
                      'Requires-Dist: nvidia-cudnn-cu13==9.27.0.42; platform_system == "Linux"'],
            "torchvision": ["Requires-Dist: torch==2.16.0"]}
    for name, files in wheels.items():
        doc = json.loads((root / f"{name}.json").read_text())
        doc["releases"][versions[name]] = [
            {"filename": f, "url": f"https://files.pythonhosted.org/packages/synthetic/{f}",
             "upload_time_iso_8601": "2026-12-01T00:00:00Z", "yanked": False, "comment_text": SYNTHETIC}
            for f in files]
        (root / f"{name}.json").write_text(json.dumps(doc))
        (root / "metadata" / f"{files[0]}.metadata").write_text(
            "\n".join([f"Name: {name}", f"Version: {versions[name]}", f"Summary: {SYNTHETIC}", *deps[name]]) + "\n")
    return root


def test_refresh_into_the_user_overlay_is_picked_by_resolve(synthetic_pypi):
    before = json.loads(run_cli("resolve", "--with", "torch", "--no-host", "--json", check=0).stdout)
    assert before["packages"]["torch"] == "2.15.0"

    plan, lines, written = run(Client(FixtureTransport(synthetic_pypi)), None)
    overlay = paths.config_dir() / "matrices"
    # the bundled TF/JAX data is complete (sources.yaml refresh.refreshed): only what the synthetic torch changes
    assert {p.name for p in written} == {"torch.yaml"}
    assert all(p.parent == overlay for p in written)
    print("\n".join(lines))
    assert "+ torch 2.16 (new release 2.16.0 (2026-12-01): PyPI default cu132 (CUDA runtime 13.2.2, cuDNN " \
           "9.27.0.42); Python 3.11-3.14; inferred variants cu132 carried from 2.15)" in lines
    assert "+ torchvision 0.30.0 (new release (2026-12-01), torch ==2.16.0)" in lines
    assert any("could not read https://download.pytorch.org/whl/torch/" in n for n in plan.notes)

    record = next(r for r in yaml.safe_load((overlay / "torch.yaml").read_text())["releases"] if r["series"] == "2.16")
    assert record["pypi"]["source"] == "https://files.pythonhosted.org/packages/synthetic/" \
                                       "torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    variant = record["variants"][0]
    assert (variant["name"], variant["cuda"], variant["cudnn"], variant["status"]) == \
           ("cu132", "13.2", "9.27.0.42", "inferred")
    assert "carried from torch 2.15 cu132" in variant["note"]

    m = loader.load()  # the loader accepts what was written
    assert "9.27.0.42" in {c.version for c in m.cudnn_builds()}  # the pinned cuDNN build is known
    build = next(b for b in m.builds_of("torch") if b.version == "2.16.0")
    assert build.prov.status == "inferred" and build.pypi_default
    checked = matrix_check.check(m)
    assert checked.errors == []
    assert any("torch 2.16.0 (cu132): inferred" in w for w in checked.warnings)

    after = json.loads(run_cli("resolve", "--with", "torch", "--with", "torchvision", "--no-host", "--json",
                               check=0).stdout)
    assert after["packages"]["torch"] == "2.16.0" and after["packages"]["torchvision"] == "0.30.0"
    assert after["cudnn"] == "9.27.0.42"

    again, lines, _ = run(Client(FixtureTransport(synthetic_pypi)), None)
    assert again.changes == [], lines  # a second refresh finds nothing new


def test_refresh_keeps_only_what_differs_from_the_bundled_data(pypi):
    """Issue #11 §3: an overlay never shadows later bundled fixes with stale copies."""
    overlay = paths.config_dir() / "matrices"
    overlay.mkdir(parents=True)
    torch = bundled("torch")
    series = {r["series"]: r for r in torch["releases"]}
    same = series["2.4"]  # a verbatim copy of the bundled record: adds nothing
    stale = dict(series["2.5"], python=["3.9"],  # what an earlier refresh wrote; the bundle has 2.5 right now
                 note="derived from PyPI metadata by `cudabox matrix refresh` (an older run)")
    mine = dict(series["2.6"], note="hand-written: our cluster's own arch notes")  # the user's own: kept
    (overlay / "torch.yaml").write_text(yaml.safe_dump({"releases": [same, stale, mine]}, sort_keys=False))

    plan, lines, written = run(pypi, ["torch"])
    kept = yaml.safe_load((overlay / "torch.yaml").read_text())["releases"]
    assert [r["series"] for r in kept] == ["2.6"] and kept[0]["note"].startswith("hand-written")
    assert any("dropped torch releases 2.4: same as the bundled record" in line for line in lines)
    assert any("dropped torch releases 2.5: the bundled data has it now" in line for line in lines)
    assert plan.changes == []  # PyPI agrees with the bundled data: nothing to add
    m = loader.load()
    assert next(b for b in m.builds_of("torch") if b.version == "2.5.1").python.allows("3.12")  # bundled wins


def test_refresh_into_bundled_files_keeps_their_comments(tmp_path, monkeypatch):
    copy = tmp_path / "matrices"
    shutil.copytree(REPO / "matrices", copy)
    monkeypatch.setenv("CUDABOX_BUNDLED_MATRICES", str(copy))
    torch_yaml = copy / "torch.yaml"  # plant a wrong pin for refresh to correct from PyPI
    text = torch_yaml.read_text()
    start = text.index('    - {version: "2.0.1", torch: "==2.0.0"')
    end = text.index("\n", start)
    torch_yaml.write_text(text[:start] + '    - {version: "2.0.1", torch: "==2.0.1", source: PyPI}' + text[end:])
    original = torch_yaml.read_text().splitlines()
    plan, _, written = run(Client(FixtureTransport(FIXTURES)), ["torch", "torchaudio"], into=copy)
    assert {p.name for p in written} == {"torch.yaml"}
    new = (copy / "torch.yaml").read_text().splitlines()
    assert [line for line in new if line.lstrip().startswith("#")] == \
           [line for line in original if line.lstrip().startswith("#")]
    removed = [line for line in original if line not in new]
    assert removed and all(line.lstrip().startswith(("versions:", "pypi:", "- {version: \"2.0.1\"")) for line in removed)
    assert '    - {version: "2.0.1", torch: "==2.0.0", source: [PyPI, ' in "\n".join(new)  # corrected from PyPI
    loader.load(bundled=copy)


def test_dry_run_writes_nothing(synthetic_pypi):
    plan, lines, written = run(Client(FixtureTransport(synthetic_pypi)), ["torch"], dry_run=True)
    assert plan.changes and written == [] and not (paths.config_dir() / "matrices").exists()


# --------------------------------------------------------------------------- the command line


def _fill_cache(fixtures: Path) -> None:
    """Replay the fixtures once through the library: afterwards `--offline` runs from the cache alone."""
    run(Client(FixtureTransport(fixtures)), None, dry_run=True)


def test_cli_offline_json_diff(synthetic_pypi):
    _fill_cache(synthetic_pypi)
    proc = run_cli("matrix", "refresh", "--offline", "--dry-run", "--json", "-f", "torch", "-f", "torchvision",
                   check=0)
    data = json.loads(proc.stdout)
    added = {c["label"]: c for c in data["changes"] if c["action"] == "add"}
    assert added["torch 2.16"]["record"]["pypi_default"] == "cu132"
    assert "torchvision 0.30.0" in added and data["dry_run"] is True and data["written"] == []
    text = run_cli("matrix", "refresh", "--offline", "--dry-run", "-f", "torch", check=0).stdout
    assert "+ torch 2.16 (new release 2.16.0" in text and "--dry-run: nothing written" in text


def test_cli_offline_without_cache_is_one_line_exit_5():
    proc = run_cli("matrix", "refresh", "--offline")
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--offline: no cached copy of https://pypi.org/pypi/torch/json" \
        in proc.stderr and "Traceback" not in proc.stderr


def test_cli_no_network_is_one_line_exit_5():
    # a proxy nobody listens on: urllib honours it, so this is "the network is down" without touching it
    env = {"https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}
    proc = run_cli("matrix", "refresh", "--dry-run", "-f", "torch", env=env)
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("cudabox: error: cannot reach https://pypi.org/pypi/torch/json: ")
    assert "check the network/proxy, or pass --ca-cert" in proc.stderr


def test_cli_missing_ca_cert_is_bad_input():
    proc = run_cli("matrix", "refresh", "--ca-cert", "/nonexistent.pem")
    assert proc.returncode == 2 and "--ca-cert: no such file: /nonexistent.pem" in proc.stderr


def test_cli_help_documents_every_option():
    out = run_cli("matrix", "refresh", "--help", check=0).stdout
    for option in ("--framework", "--dry-run", "--into", "--ca-cert", "--offline", "--json", "--project"):
        assert option in out


# --------------------------------------------------------------------------- network manners, on a real server


class _Server:
    """A tiny HTTP server in a thread: ETag/304, scripted failures, Range requests."""

    def __init__(self):
        self.requests: list[dict] = []
        self.failures = 0
        self.files: dict[str, bytes] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
                if server.failures:
                    server.failures -= 1
                    return self._send(503, b"busy")
                body = server.files.get(self.path)
                if body is None:
                    return self._send(404, b"")
                if self.headers.get("If-None-Match") == '"v1"':
                    return self._send(304, b"")
                rng = self.headers.get("Range")
                if rng:
                    start, end = (int(x) for x in rng.split("=")[1].split("-"))
                    return self._send(206, body[start:end + 1],
                                      {"Content-Range": f"bytes {start}-{end}/{len(body)}"})
                self._send(200, body, {"ETag": '"v1"'})

            def _send(self, status, body, headers=None):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    s = _Server()
    yield s
    s.close()


def test_etag_second_fetch_is_conditional_and_uses_the_cache(server, tmp_path):
    server.files["/pypi/torch/json"] = b'{"info": {"name": "torch"}, "releases": {}}'
    client = Client(HTTPTransport(retries=0), cache_dir=tmp_path, index=server.url)
    assert client.project("torch")["info"]["name"] == "torch"
    assert "if-none-match" not in server.requests[0]
    assert client.project("torch")["info"]["name"] == "torch"  # served from the cache on 304
    assert server.requests[1]["if-none-match"] == '"v1"'


def test_retries_back_off_exponentially_on_5xx(server, tmp_path):
    server.files["/pypi/jax/json"] = b'{"info": {"name": "jax"}, "releases": {}}'
    server.failures = 2
    slept = []
    client = Client(HTTPTransport(retries=3, backoff=0.5, sleep=slept.append), cache_dir=tmp_path, index=server.url)
    assert client.project("jax")["info"]["name"] == "jax"
    assert slept == [0.5, 1.0] and len(server.requests) == 3


def test_metadata_from_http_ranges_of_the_wheel(server, tmp_path):
    """No PEP 658 file: METADATA is read with Range requests, without downloading the wheel."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/big.bin", bytes(range(256)) * 4096)
        zf.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\nRequires-Python: >=3.10\n"
                                                   "Requires-Dist: nvidia-cudnn-cu12==9.1.0.70\n")
    server.files["/files/demo-1.0-py3-none-any.whl"] = buf.getvalue()
    client = Client(HTTPTransport(retries=0), cache_dir=tmp_path, index=server.url)
    meta = client.metadata("demo", "1.0", {"filename": "demo-1.0-py3-none-any.whl",
                                           "url": f"{server.url}/files/demo-1.0-py3-none-any.whl"})
    assert meta.requires_dist == ["nvidia-cudnn-cu12==9.1.0.70"] and meta.requires_python == ">=3.10"
    ranges = [r for r in server.requests if "range" in r]
    assert ranges and all("range" in r for r in server.requests if r["path"].endswith(".whl"))


# --------------------------------------------------------------------------- live PyPI (CI)


@pytest.mark.network
def test_live_pypi_lists_releases_newer_than_the_bundled_data(tmp_path):
    docs = overlay.load_documents(None, REPO / "matrices")
    start = time.monotonic()
    newer = newer_releases(Client(HTTPTransport(), cache_dir=tmp_path), docs)
    took = time.monotonic() - start
    for name, rels in newer.items():
        print(f"{name}: {', '.join(f'{r.version} ({r.uploaded})' for r in rels) or 'nothing newer'} than the matrix")
    print(f"live newer_releases: {took:.1f} s")  # a figure, not an assertion (bench/refresh_cold.py measures)
    assert set(newer) == {"torch", "tensorflow", "jax", "paddle"}  # MXNet: one project per CUDA build, retired
