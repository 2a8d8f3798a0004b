"""Issue #11 §2: rules that were missing or wrong, each table-driven from the case that exposed it."""

from __future__ import annotations

import json

import pytest
from packaging.specifiers import SpecifierSet

from cudabox.cli.output import wrapped
from cudabox.errors import InputError, Unsatisfiable
from cudabox.knowledge import loader
from cudabox.project.spec import load_spec
from cudabox.resolve.environment import Chooser
from cudabox.resolve.request import Request
from cudabox.resolve.resolver import resolve
from cudabox.resolve.ways import nearest_versions

from .test_resolve import framework, req


@pytest.fixture(scope="module")
def m():
    return loader.load()


def stack_of(m, *requirements, **kw):
    return resolve(m, req(m, *requirements, **kw))


def refusal(m, *requirements, **kw) -> str:
    with pytest.raises(Unsatisfiable) as err:
        stack_of(m, *requirements, **kw)
    assert err.value.exit_code == 3
    return "\n".join(err.value.reasons)


# ---------------------------------------------------------------- 1. cuDNN builds have GPU floors


@pytest.mark.parametrize("requirement,gpu", [
    ("tensorflow[and-cuda]==2.20.0", "V100"),
    ("jax[cuda12]", "V100"),
    ("jax[cuda12]", "P100"),
])
def test_cudnn_floor_picks_a_cudnn_the_gpu_runs(m, requirement, gpu):
    s = stack_of(m, requirement, gpus=(gpu,))
    series = m.cudnn_series(s.cudnn)
    assert series.min_cc is None or tuple(map(int, series.min_cc.split("."))) <= (7, 0), s.cudnn
    assert any("the target GPUs run (newer: cuDNN" in w and "needs compute capability >= 7.5" in w for w in s.why)


def test_cudnn_floor_refusal_names_the_floor(m):
    reasons = refusal(m, "jax[cuda12]", gpus=("V100",), cudnn=">=9.11")
    assert "compute capability >= 7.5" in reasons and "7.0" in reasons


def test_cudnn_floor_leaves_newer_gpus_alone(m):
    assert stack_of(m, "jax[cuda12]", gpus=("H100",)).cudnn == max(
        (b.version for b in m.cudnn_builds() if "cu12" in b.wheels), key=lambda v: tuple(map(int, v.split("."))))


# ---------------------------------------------------------------- 2. local version tags must agree


@pytest.mark.parametrize("requirements,named", [
    (("torch==2.2.2+cu121", "torchvision==0.17.2+cu118"), ("cu121", "cu118")),
    (("torch==2.4.1+cu124", "torchaudio==2.4.1+cu118"), ("cu124", "cu118")),
])
def test_two_cuda_tags_are_exit_3_naming_both(m, requirements, named):
    reasons = refusal(m, *requirements)
    assert all(r in reasons for r in requirements) and all(n in reasons for n in named)


@pytest.mark.parametrize("requirements,variant", [
    (("torchvision==0.17.2+cu118",), "cu118"),
    (("torch==2.2.2", "torchvision==0.17.2+cu118"), "cu118"),
])
def test_a_companion_tag_is_never_dropped(m, requirements, variant):
    s = stack_of(m, *requirements)
    assert framework(s, "torch").variant == variant
    assert s.packages["torchvision"].endswith("+" + variant)


# ---------------------------------------------------------------- 5. jax extras and jaxlib


@pytest.mark.parametrize("text", ["jax[cuda21]", "jax[cuda11]", "jax[cuda14_pip]"])
def test_unknown_jax_extra_is_bad_input_naming_the_known_ones(m, text):
    with pytest.raises(InputError) as err:
        stack_of(m, text)
    assert err.value.exit_code == 2 and "jax[cuda12]" in str(err.value) and "jax[cuda13]" in str(err.value)


@pytest.mark.parametrize("text,version,variant", [
    ("jaxlib==0.4.26+cuda12.cudnn89", "0.4.26", "cuda12"),
    ("jax[cuda12_pip]==0.4.30", "0.4.30", "cuda12"),
    ("jax[cuda12-local]==0.6.2", "0.6.2", "cuda12"),
])
def test_jaxlib_local_tags_and_old_extras_are_understood(m, text, version, variant):
    f = framework(stack_of(m, text), "jax")
    assert (f.version, f.variant) == (version, variant)


def test_jaxlib_cuda11_tag_is_a_cuda11_variant_not_a_literal(m):
    reasons = refusal(m, "jaxlib==0.4.26+cuda11.cudnn86")
    assert "variants: cuda12, cuda13" in reasons


# ---------------------------------------------------------------- 6. CPU packages stay CPU


def test_jax_gpu_with_tensorflow_cpu_for_data_loading(m):
    s = stack_of(m, "jax[cuda12]", "tensorflow-cpu")
    assert [f.name for f in s.frameworks] == ["jax"]
    assert m.frameworks.split(["jax[cuda12]", "tensorflow-cpu"])[1] == ["tensorflow-cpu"]  # a plain package


@pytest.mark.parametrize("cpu", ["torch==2.4.1+cpu", "jax[cpu]==0.6.2", "tensorflow-cpu==2.15.1"])
def test_cpu_builds_never_pull_a_gpu_stack(m, cpu):
    s = stack_of(m, cpu, cuda="==12.4.*")  # a plain CUDA stack: the CPU package rides along as a package
    assert s.frameworks == () or all(f.name not in cpu for f in s.frameworks)


# ---------------------------------------------------------------- 7. variant preference


@pytest.mark.parametrize("requirement,kw,variant", [
    # driver known + GPUs with SASS: newest CUDA native or under minor-version compatibility
    ("torch==2.5.1", dict(gpus=("H100",), driver="525.60.13"), "cu124"),
    ("torch==2.4.1", dict(gpus=("A100",), driver="525.60.13"), "cu124"),
    # no driver: never a newer CUDA major than plain pip gives
    ("torch==2.9.1", {}, "cu128"),
    ("torch==2.10.0", {}, "cu128"),
    # no driver: within pip's major, the newest variant that covers the GPUs
    ("torch==2.12.1", dict(gpus=("V100",)), "cu126"),
])
def test_variant_preference(m, requirement, kw, variant):
    assert framework(stack_of(m, requirement, **kw), "torch").variant == variant


def test_no_gpus_known_keeps_native_first(m):
    # nothing shows SASS coverage, so the native CUDA wins over a newer minor-compat one
    assert framework(stack_of(m, "torch==2.4.*", driver="535.104.05"), "torch").variant == "cu121"


# ---------------------------------------------------------------- 3. cuda: constrains the stack's CUDA


@pytest.mark.parametrize("requirement,cuda,stack_cuda,base", [
    # a system-CUDA framework: the image's toolkit is the stack's CUDA (TF 2.11 was built with 11.2)
    ("tensorflow==2.11.*", "==11.8.*", "11.8", "nvidia/cuda:11.8.0-"),
    ("tensorflow==2.5.*", "==11.8.*", "11.8", "nvidia/cuda:11.8.0-"),
    # wheels that take a range of CUDA minors: the runtime wheel is pinned to what was asked
    ("tensorflow[and-cuda]==2.20.0", "==12.8.*", "12.8", "slim"),
    ("jax[cuda12]==0.6.2", "==12.3.*", "12.3", "slim"),
    # a wheel built for one CUDA (torch's variant) is that CUDA
    ("torch==2.5.1", "==12.1.*", "12.1", "slim"),
])
def test_cuda_constrains_the_stack_cuda(m, requirement, cuda, stack_cuda, base):
    s = stack_of(m, requirement, cuda=cuda)
    if base == "slim":  # CUDA from the wheels: a slim base, no nvidia/cuda image
        assert s.cuda == stack_cuda and s.flavour == "slim" and "nvidia/cuda" not in s.base_image
    else:
        assert s.cuda == stack_cuda and s.base_image.startswith(base)
    assert s.requirement == f"cuda>={stack_cuda}"


@pytest.mark.parametrize("requirement", ["tensorflow[and-cuda]==2.20.0", "jax[cuda12]==0.6.2"])
def test_ranged_wheels_pin_the_runtime_wheel_to_the_asked_cuda(m, requirement):
    s = stack_of(m, requirement, cuda="==12.6.*")
    assert s.packages["nvidia-cuda-runtime-cu12"] == "12.6.*"
    assert "nvidia-cuda-runtime-cu12==12.6.*" in s.requirements
    assert any("newest minor within cuda ==12.6.*" in w for w in s.why)


@pytest.mark.parametrize("requirement,cuda,named", [
    ("tensorflow==2.11.*", "==12.4.*", "runs on CUDA 11.2–11.8, outside cuda ==12.4.*"),
    ("tensorflow[and-cuda]==2.20.0", "==12.4.*", "runs on CUDA 12.5–"),  # its runtime wheel needs >= 12.5.82
    ("torch==2.5.1", "==12.2.*", "(cu118) runs on CUDA 11.8, outside cuda ==12.2.* (and 2 similar"),
])
def test_cuda_outside_what_a_build_runs_on_is_refused_naming_the_range(m, requirement, cuda, named):
    assert named in refusal(m, requirement, cuda=cuda)


# ---------------------------------------------------------------- 4. a framework needs its libraries' sonames


def test_tf_24_never_gets_a_newer_cuda_11_image(m):
    # TF 2.4 was built against CUDA 11.0 and loads libcusolver.so.10; CUDA 11.1+ ship libcusolver.so.11
    reasons = refusal(m, "tensorflow==2.4.*")
    assert "nvidia/cuda 11.0.3 is deleted" in reasons
    assert "loads libcusolver.so.10, which CUDA 11.1–11.8 don't ship" in reasons
    assert "way out: use tensorflow 2.5.3 (system), the release nearest to tensorflow==2.4.*" in reasons


def test_tf_24_with_cuda_118_names_the_soname(m):
    reasons = refusal(m, "tensorflow==2.4.*", cuda="==11.8.*")
    assert "runs on CUDA 11.0 (tensorflow 2.4 loads libcusolver.so.10" in reasons


def test_sonames_are_data(m):
    tf24 = next(b for b in m.builds if b.framework == "tensorflow" and b.version == "2.4.0")
    assert tf24.sonames == ("libcusolver.so.10",)
    assert m.missing_sonames("11.8", tf24.sonames) == ["libcusolver.so.10"]
    assert m.missing_sonames("11.0", tf24.sonames) == []
    tf25 = next(b for b in m.builds if b.framework == "tensorflow" and b.version == "2.5.0")
    assert "11.8" in Chooser(m, Request(requirements=("tensorflow==2.5.0",))).cuda_minors(tf25)


# ---------------------------------------------------------------- 8. end-of-life images


@pytest.mark.parametrize("requirement,image", [
    ("tensorflow==2.10.*", "11.8.0"),
    ("tensorflow==2.13.*", "11.8.0"),
])
def test_eol_images_are_used_with_a_warning_in_why_and_lock(m, requirement, image):
    s = stack_of(m, requirement)
    assert s.base_image.startswith(f"nvidia/cuda:{image}-")
    line = f"nvidia/cuda {image} is end-of-life"
    assert any(line in w for w in s.warnings) and any(line in w for w in s.why)
    assert any(line in w for w in s.to_dict()["warnings"])  # what the lock stores


@pytest.mark.parametrize("requirement", ["tensorflow==2.10.*", "tensorflow==2.13.*"])
def test_refuse_eol_images_refuses_them(m, requirement):
    reasons = refusal(m, requirement, refuse_eol_images=True)
    assert "is end-of-life (refuse_eol_images is set)" in reasons


def test_deleted_tags_are_never_used(m):
    deleted = {i.cuda for i in m.cuda_images if i.lifecycle == "deleted"}
    for requirement in ("tensorflow==2.4.*", "tensorflow==2.10.*", "tensorflow==2.13.*"):
        try:
            s = stack_of(m, requirement)
        except Unsatisfiable:
            continue
        assert not any(s.base_image.startswith(f"nvidia/cuda:{v}-") for v in deleted)


def test_refuse_eol_images_is_a_cudabox_yaml_key(tmp_path):
    (tmp_path / "cudabox.yaml").write_text("requirements: [tensorflow==2.10.*]\nrefuse_eol_images: true\n")
    assert load_spec(tmp_path).refuse_eol_images is True
    (tmp_path / "cudabox.yaml").write_text("requirements: [tensorflow==2.10.*]\nrefuse_eol_images: maybe\n")
    with pytest.raises(InputError, match="cudabox.yaml:2.*refuse_eol_images: expected true or false"):
        load_spec(tmp_path)


# ---------------------------------------------------------------- 9. refusals point the way


@pytest.mark.parametrize("requirement,nearest", [
    ("torch==2.3.7", "nearest known: 2.3.1, 2.4.0"),
    ("tensorflow==2.12.5", "nearest known: 2.12.1, 2.13.0"),
    ("torch==9.0", "nearest known: "),
])
def test_unknown_pin_names_the_nearest_releases_and_refresh(m, requirement, nearest):
    reasons = refusal(m, requirement)
    assert nearest in reasons and "cudabox matrix refresh" in reasons


@pytest.mark.parametrize("requirements,kw,way", [
    (("torch==2.4.1+cu118",), dict(cuda="==12.4.*"), "use torch 2.4.1 (cu124), the release nearest to torch==2.4.1+cu118"),
    (("torch==2.7.*",), dict(cuda="==12.8.*", gpus=("V100",)), "use torch 2.8.0 (cu128), the release nearest"),
    (("tensorflow==2.4.*",), {}, "use tensorflow 2.5.3 (system), the release nearest"),
    (("tensorflow==2.4.*",), dict(refuse_eol_images=True), "use tensorflow 2.14.1 (and-cuda), the release nearest"),
])
def test_way_out_prefers_the_release_nearest_to_the_pin(m, requirements, kw, way):
    assert f"way out: {way}" in refusal(m, *requirements, **kw)


def test_nearest_versions_order(m):
    order = nearest_versions(m, "torch", SpecifierSet("==2.4.1"))
    assert order[:3] == ["2.4.1", "2.5.1", "2.3.1"]  # the asked release, then series either side, newer first


def test_long_reasons_wrap_into_short_lines():
    text = wrapped("word " * 60)
    lines = text.splitlines()
    assert len(lines) > 2 and all(len(line) <= 100 for line in lines)
    assert lines[0].startswith("  - ") and all(line.startswith("    ") for line in lines[1:])


# ---------------------------------------------------------------- 10. a plain CUDA stack from flags


def test_resolve_cuda_and_gpu_work_without_cudabox_yaml(cli, tmp_path):
    proc = cli("resolve", "--cuda", "12.8", "--gpu", "RTX 5090", "--json", cwd=tmp_path, check=0)
    data = json.loads(proc.stdout)
    assert data["cuda"] == "12.8" and data["frameworks"] == [] and data["targets"][0]["sm"] == "sm_120"
    assert not (tmp_path / "cudabox.yaml").exists()


def test_resolve_without_cudabox_yaml_or_cuda_is_still_bad_input(cli, tmp_path):
    proc = cli("resolve", "--gpu", "RTX 5090", cwd=tmp_path, check=2)
    assert "cudabox.yaml: not found" in proc.stderr


# ---------------------------------------------------------------- §1 companions: confirmed or said not to be


@pytest.mark.parametrize("requirements,line", [
    (("torch==2.5.1", "torchvision"), "torchvision 0.20.1: pairs with torch 2.5.1 (its wheel pins torch==2.5.1)"),
    (("torch==2.12.*", "torchaudio"), "torchaudio 2.11.0: paired with torch 2.12.1, not confirmed: its wheel "
                                      "declares no torch pin"),
])
def test_companion_pairings_say_whether_the_data_confirms_them(m, requirements, line):
    assert any(w.startswith(line) for w in stack_of(m, *requirements).why)


def test_eol_warning_reaches_the_lock_and_the_flag_refuses(cli, tmp_path):
    (tmp_path / "cudabox.yaml").write_text("requirements: [tensorflow==2.10.*]\n")
    cli("lock", "-C", tmp_path, check=0)
    lock = json.loads((tmp_path / "cudabox.lock").read_text())
    assert any("nvidia/cuda 11.8.0 is end-of-life" in w for w in lock["stack"]["warnings"])
    proc = cli("lock", "-C", tmp_path, "--refuse-eol-images", check=3)
    assert "refuse_eol_images is set" in proc.stderr
    (tmp_path / "cudabox.yaml").write_text("requirements: [tensorflow==2.10.*]\nrefuse_eol_images: true\n")
    cli("resolve", "-C", tmp_path, check=3)


def test_init_accepts_refuse_eol_images_and_writes_the_key(cli, tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==2.5.1\n")
    cli("init", tmp_path, "--yes", "--refuse-eol-images", check=0)
    assert load_spec(tmp_path).refuse_eol_images is True
    (tmp_path / "requirements.txt").write_text("tensorflow==2.10.1\n")
    cli("init", tmp_path, "--yes", "--force", "--refuse-eol-images", check=3)  # its only image is EOL


# ---------------------------------------------------------------- 14. a variant's own Python list


@pytest.fixture(scope="module")
def variant_python(tmp_path_factory):
    """The bundled torch 2.8 with cu126 and cu129 carrying `python: [3.10 ... 3.13]` (the series: 3.9-3.13), in
    a project overlay: variants whose index wheels lack a Python the series' PyPI wheels have (made up here)."""
    import yaml

    from tests.support import REPO

    project = tmp_path_factory.mktemp("variant-python")
    record = next(r for r in yaml.safe_load((REPO / "matrices" / "torch.yaml").read_text())["releases"]
                  if r["series"] == "2.8")
    for variant in record["variants"]:
        if variant["name"] in ("cu126", "cu129"):
            variant["python"] = ["3.10", "3.11", "3.12", "3.13"]
    (project / ".cudabox" / "matrices").mkdir(parents=True)
    (project / ".cudabox" / "matrices" / "torch.yaml").write_text(yaml.safe_dump({"releases": [record]}))
    return loader.load(project)


@pytest.mark.parametrize("variant,pythons", [
    ("cu126", ("3.10", "3.11", "3.12", "3.13")),  # its own list
    ("cu128", ("3.9", "3.10", "3.11", "3.12", "3.13")),  # absent: the series' list
    ("cu129", ("3.10", "3.11", "3.12", "3.13")),
])
def test_a_variant_python_list_replaces_the_series_list_for_that_variant(variant_python, variant, pythons):
    build = next(b for b in variant_python.builds_of("torch") if b.version == "2.8.0" and b.variant == variant)
    assert build.python.versions == pythons


@pytest.mark.parametrize("python,gpu,outcome", [
    ("==3.10", None, "cu129"),  # the newest CUDA 12 variant
    ("==3.9", None, "cu128"),  # cu129 has no 3.9: the PyPI default, which has
    ("==3.10", "P100", "cu126"),  # sm_60: only cu126 has it, and it has 3.10
    ("==3.9", "P100", "torch 2.8.x (cu126) supports Python 3.10-3.13, not ==3.9"),  # refused, saying why
])
def test_a_variant_without_the_asked_python_is_not_chosen(variant_python, python, gpu, outcome):
    kw = dict(python=python, gpus=(gpu,) if gpu else ())
    if outcome.startswith("cu"):
        s = stack_of(variant_python, "torch==2.8.0", **kw)
        assert [f.variant for f in s.frameworks] == [outcome] and s.python == python[2:]
    else:
        assert outcome in refusal(variant_python, "torch==2.8.0", **kw)


def test_matrix_show_names_a_variant_python_list(variant_python):
    release = next(r for r in variant_python.releases if r.framework == "torch" and r.series == "2.8")
    assert "cu126 (Python 3.10-3.13)" in release.summary and "cu128 (PyPI);" in release.summary


@pytest.mark.parametrize("python,outcome", [
    (None, "3.10"),  # the newest Python its [and-cuda] pins install on
    ("==3.10", "3.10"),
    ("==3.11", "tensorflow 2.14.x (and-cuda) supports Python 3.9-3.10, not ==3.11"),  # tensorrt 8.5.3.1: cp36-cp310
])
def test_tensorflow_and_cuda_carries_its_own_python_list(m, python, outcome):
    """Found by locking the catalog: TF 2.14's [and-cuda] pins tensorrt==8.5.3.1 (wheels cp36-cp310 only), so
    its and_cuda record lists Python 3.9-3.10 while TF itself has 3.11 wheels."""
    kw = dict(python=python) if python else {}
    if outcome[0].isdigit():
        assert stack_of(m, "tensorflow[and-cuda]==2.14.1", **kw).python == outcome
    else:
        assert outcome in refusal(m, "tensorflow[and-cuda]==2.14.1", **kw)
