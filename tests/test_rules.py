"""Issue #11 §2: rules that were missing or wrong, each table-driven from the case that exposed it."""

from __future__ import annotations

import pytest

from cudabox.errors import InputError, Unsatisfiable
from cudabox.knowledge import loader
from cudabox.resolve.resolver import resolve

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
