"""The knowledge base holds the facts of ../shared/reference (issue 2), and the loader guards it."""

from __future__ import annotations

import os
import shutil

import pytest

from cudabox.knowledge import loader
from cudabox.errors import InputError
from cudabox.knowledge.check import check
from cudabox.knowledge.model import DriverVersion

from tests.support import REPO


def build(m, framework, version, variant):
    return next(b for b in m.builds_of(framework) if b.version == version and b.variant == variant)


def test_bundled_matrix_passes_cross_checks(matrix):
    result = check(matrix)
    assert result.errors == []


def test_torch_27_cu128_has_sm120_but_not_sm70(matrix):
    b = build(matrix, "torch", "2.7.1", "cu128")
    assert "sm_120" in b.arch.sass and "sm_70" not in b.arch.sass
    assert b.arch.coverage("12.0", ptx_jit=False) == "sass sm_120"
    assert b.arch.coverage("7.0", ptx_jit=True) is None


def test_cuda_130_cannot_compile_volta_but_129_can(matrix):
    assert not matrix.toolkit("13.0").can_compile("7.0")
    assert matrix.toolkit("12.9").can_compile("7.0")
    assert "sm_120" in matrix.toolkit("12.8").sass and "sm_120" not in matrix.toolkit("12.6").sass


def test_cuda_124_needs_driver_550_54_14(matrix):
    assert str(matrix.toolkit("12.4").min_driver) == "550.54.14"
    assert matrix.runs_natively(DriverVersion.parse("550.54.14"), "12.4")
    assert not matrix.runs_natively(DriverVersion.parse("545.23.08"), "12.4")


def test_minor_version_floors(matrix):
    floors = {m.major: str(m.minor_compat_driver) for m in matrix.majors.values()}
    assert floors == {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
    assert matrix.minor_compatible(DriverVersion.parse("470.82.01"), "11.8")
    assert not matrix.minor_compatible(DriverVersion.parse("470.82.01"), "12.0")


def test_r565_reports_127_though_no_127_toolkit(matrix):
    assert matrix.driver_cuda(DriverVersion.parse("565.57.01")) == "12.7"
    assert matrix.toolkit("12.7") is None


def test_tf_215_is_cuda_122_cudnn_89(matrix):
    b = build(matrix, "tensorflow", "2.15.1", "and-cuda")
    assert b.cuda == "12.2" and b.cudnn == "==8.9.4.25" and b.wheels_cuda
    old = build(matrix, "tensorflow", "2.10.0", "system")
    assert old.cuda == "11.2" and old.system_cudnn == "8.1" and not old.wheels_cuda


@pytest.mark.parametrize("name,cc", [
    ("Tesla V100-SXM2-32GB", "7.0"), ("NVIDIA GeForce RTX 2080 Ti", "7.5"), ("NVIDIA H100 80GB HBM3", "9.0"),
    ("V100", "7.0"), ("RTX 4090", "8.9"), ("nvidia geforce rtx 5090", "12.0"), ("sm_89", "8.9"), ("8.6", "8.6"),
])
def test_gpu_names_resolve(matrix, name, cc):
    assert matrix.gpu(name).cc == cc


def test_unknown_gpu_suggests_close_names(matrix):
    with pytest.raises(InputError) as err:
        matrix.gpu("RTX 4909")
    assert "RTX 4090" in str(err.value) and err.value.exit_code == 2


def test_gpu_coverage_of_the_data(matrix):
    classes = {g.gpu_class for g in matrix.gpus}
    assert len(matrix.gpus) >= 40 and classes == {"datacenter", "workstation", "consumer", "jetson"}
    assert matrix.gpu("A100").datacenter and not matrix.gpu("RTX 4090").datacenter


def test_unverified_facts_are_marked(matrix):
    assert matrix.gpu("B100").prov.status == "unverified"
    assert matrix.toolkit("13.4").prov.status == "unverified" or not matrix.toolkit("13.4").releases


def test_every_record_names_a_source(matrix):
    result = check(matrix)
    assert not [e for e in result.errors if "source" in e]
    assert all(b.prov.source for b in matrix.builds)


def test_companion_pins(matrix):
    tv = {c.version: c.pin for c in matrix.companions_of("torchvision")}
    assert tv["0.20.1"] == "==2.5.1"


def _copy_matrices(tmp_path):
    target = tmp_path / "matrices"
    shutil.copytree(REPO / "matrices", target)
    return target


def test_broken_file_reports_file_and_line(tmp_path):
    bundled = _copy_matrices(tmp_path)
    text = (bundled / "gpus.yaml").read_text().replace('cc: "7.0"', 'cc: "seven"', 1)
    (bundled / "gpus.yaml").write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if '"seven"' in ln)
    with pytest.raises(InputError) as err:
        loader.load(bundled=bundled)
    assert f"gpus.yaml:{line}:" in str(err.value) and "cc" in str(err.value)


def test_unknown_key_is_an_error(tmp_path):
    bundled = _copy_matrices(tmp_path)
    path = bundled / "drivers.yaml"
    path.write_text(path.read_text().replace("- {branch: 450,", "- {brnach: 1, branch: 450,", 1))
    with pytest.raises(InputError, match=r"drivers.yaml:\d+: .*unknown key 'brnach'"):
        loader.load(bundled=bundled)


def test_overlays_project_over_user_over_bundled(tmp_path, monkeypatch):
    user = tmp_path / "xdg" / "cudabox" / "matrices"
    user.mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (user / "gpus.yaml").write_text(
        "gpus:\n  - {name: Lab GPU, cc: '8.6', arch: Ampere, class: workstation, aliases: [labby], source: local}\n")
    project = tmp_path / "proj"
    (project / ".cudabox" / "matrices").mkdir(parents=True)
    (project / ".cudabox" / "matrices" / "gpus.yaml").write_text(
        "gpus:\n  - {name: Lab GPU, cc: '8.9', arch: Ada, class: workstation, aliases: [labby], source: local}\n")
    assert loader.load().gpu("labby").cc == "8.6"
    m = loader.load(project)
    assert m.gpu("labby").cc == "8.9"
    assert m.gpu("V100").cc == "7.0"  # bundled records remain


def test_overlay_error_names_overlay_file(tmp_path):
    project = tmp_path / "proj"
    (project / ".cudabox" / "matrices").mkdir(parents=True)
    (project / ".cudabox" / "matrices" / "drivers.yaml").write_text("branches:\n  - {branch: 999}\n")
    with pytest.raises(InputError, match=r"\.cudabox/matrices/drivers.yaml:2: .*missing required key 'cuda'"):
        loader.load(project)


# --------------------------------------------------------------------------- the compiled matrix cache


def test_compiled_matrix_is_cached_by_content_and_never_stale(tmp_path, monkeypatch):
    from cudabox.paths import cache_dir

    from cudabox.knowledge import compiled as compiled_mod

    bundled = _copy_matrices(tmp_path)
    first = loader.load(bundled=bundled)
    compiled = list((cache_dir() / "matrix").glob("*.pickle"))
    assert len(compiled) == 1
    assert loader.load(bundled=bundled) is first  # this process has it: one unpickling per command
    monkeypatch.setattr(compiled_mod, "_LOADED", {})  # a new process
    again = loader.load(bundled=bundled)  # served from the cache: the same facts
    assert again.gpu("V100").cc == first.gpu("V100").cc and again is not first
    # an edit with the same size and an old mtime is still seen: the key is the content
    path = bundled / "gpus.yaml"
    text, stat = path.read_text(), path.stat()
    edited = text.replace("name: \"Tesla V100 PCIe 16 GB\"", "name: \"Tesla W100 PCIe 16 GB\"", 1)
    assert edited != text and len(edited) == len(text)
    path.write_text(edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert loader.load(bundled=bundled).find_gpu("Tesla W100 PCIe 16 GB") is not None
    assert len(list((cache_dir() / "matrix").glob("*.pickle"))) == 2
    # a broken compiled file is compiled again, not trusted
    for pickled in (cache_dir() / "matrix").glob("*.pickle"):
        pickled.write_bytes(b"not a pickle")
    monkeypatch.setattr(compiled_mod, "_LOADED", {})
    assert loader.load(bundled=bundled).find_gpu("Tesla W100 PCIe 16 GB") is not None
    # errors are never cached
    path.write_text(text.replace('cc: "7.0"', 'cc: "seven"', 1))
    for _ in range(2):
        with pytest.raises(InputError, match="gpus.yaml"):
            loader.load(bundled=bundled)
