"""The resolver's rules, table-driven with real cases from the reference facts (issue 3)."""

from __future__ import annotations

import pytest

from cudabox.errors import InputError, Unsatisfiable
from cudabox.knowledge.model import DriverVersion
from cudabox.resolve.request import Request
from cudabox.resolve.resolver import resolve


def req(m, *requirements, gpus=(), driver=None, **kw) -> Request:
    return Request(requirements=tuple(requirements), gpus=tuple(m.gpu(g) for g in gpus),
                   driver=DriverVersion.parse(driver) if driver else None, **kw)


def ok(m, *requirements, **kw):
    return resolve(m, req(m, *requirements, **kw))


def refused(m, *requirements, **kw) -> str:
    with pytest.raises(Unsatisfiable) as err:
        resolve(m, req(m, *requirements, **kw))
    assert err.value.exit_code == 3
    return "\n".join(err.value.reasons)


def framework(stack, name):
    return next(f for f in stack.frameworks if f.name == name)


# ---------------------------------------------------------------- rule 1: driver

def test_r470_runs_cuda_118_under_minor_version_compatibility(matrix):
    s = ok(matrix, cuda="==11.8.*", driver="470.82.01")
    assert (s.cuda, s.driver_mode) == ("11.8", "minor-compat")
    assert s.requirement == "cuda>=11.0" and s.min_driver == "450.80.02"
    assert any("minor-version compatibility" in w for w in s.why)


def test_r470_cannot_run_cuda_12_without_forward_compat(matrix):
    reasons = refused(matrix, cuda="==12.4.*", driver="470.82.01", gpus=("A100",))
    assert "CUDA 12.4 needs driver >= 550.54.14" in reasons and "525.60.13" in reasons
    assert "way out: upgrade the driver to >= 525.60.13" in reasons  # 12.x minor-version compatibility


def test_forward_compat_only_when_asked_and_only_on_datacenter_gpus(matrix):
    s = ok(matrix, cuda="==12.4.*", driver="470.82.01", gpus=("A100",), allow_forward_compat=True)
    assert s.driver_mode == "forward-compat" and s.flavour == "runtime"
    assert s.base_image.startswith("nvidia/cuda:12.4.1-runtime-") and "brand=tesla,driver>=470" in s.requirement
    refused(matrix, cuda="==12.4.*", driver="470.82.01", gpus=("RTX 3090",), allow_forward_compat=True)


def test_native_cuda_preferred_over_minor_compat(matrix):
    s = ok(matrix, "torch==2.4.*", driver="535.104.05")  # R535 runs 12.2 natively
    assert framework(s, "torch").variant == "cu121" and s.driver_mode == "native"


def test_old_driver_falls_back_to_cuda_11_variant(matrix):
    s = ok(matrix, "torch==2.7.*", driver="470.82.01", gpus=("A100",))
    assert framework(s, "torch").variant == "cu118" and s.driver_mode == "minor-compat"


def test_driver_too_old_for_gpu_names_the_driver_needed(matrix):
    reasons = refused(matrix, "torch", gpus=("RTX 5090",), driver="550.54.14")
    assert "needs a driver >= 570.26" in reasons and "sm_120" in reasons
    assert "way out: upgrade the driver to >= 570.26" in reasons


# ---------------------------------------------------------------- rule 2: GPU

def test_volta_and_torch_27_picks_cu126_not_cu128(matrix):
    s = ok(matrix, "torch==2.7.*", gpus=("V100",))
    assert framework(s, "torch").variant == "cu126" and s.cuda == "12.6"
    assert any("passed over" in w and "cu128" in w and "sm_70" in w for w in s.why)


def test_volta_torch_27_on_cuda_128_is_refused_with_a_way_out(matrix):
    reasons = refused(matrix, "torch==2.7.*", gpus=("V100",), cuda="==12.8.*")
    assert "no code for Tesla V100 SXM2 32 GB (sm_70)" in reasons
    # 2.8-2.10 re-added Volta to cu128; rule 9: the way out is the nearest release, not the newest
    assert "way out: use torch 2.8.0 (cu128), the release nearest to torch==2.7.*" in reasons


def test_rtx_5090_needs_cuda_128(matrix):
    reasons = refused(matrix, cuda="<12.8", gpus=("RTX 5090",))
    assert "cannot compile sm_120" in reasons and "CUDA 12.8 is the first that can" in reasons
    assert ok(matrix, cuda=">=12.8", gpus=("RTX 5090",), driver="570.26").cuda in ("12.8", "12.9")


def test_ptx_needs_native_driver(matrix):
    # TF 2.15 has SASS up to sm_80 + PTX compute_80: H100 only through PTX JIT, which minor compat lacks.
    reasons = refused(matrix, "tensorflow==2.15.*", gpus=("H100",), driver="525.60.13")
    assert "without PTX JIT" in reasons
    s = ok(matrix, "tensorflow==2.15.*", gpus=("H100",), driver="535.104.05")
    assert any("ptx compute_80" in w for w in s.why)


# ---------------------------------------------------------------- rule 3: one environment

def test_torch_23_with_jax_0430_conflict_on_cudnn(matrix):
    reasons = refused(matrix, "torch==2.3.*", "jax>=0.4.30")
    # jax 0.4.30's plugin pins nvidia-cudnn-cu12>=9.0,<10 (PyPI); 0.4.31 on pin >=9.1
    assert "torch 2.3.x (cu121) pins cuDNN 8.9.2.26 but jax" in reasons and "needs cuDNN >=9.0,<10" in reasons
    assert "way out: use jax 0.4.28 (cuda12)" in reasons  # the newest jax on cuDNN 8.9


def test_torch_27_with_jax_06_conflict(matrix):
    reasons = refused(matrix, "torch==2.7.*", "jax>=0.6")
    assert "pins cuDNN 9.5.1.17" in reasons or "pins cuDNN 9.7.1.26" in reasons
    assert "way out: use torch" in reasons


def test_torch_210_and_jax_share_cudnn_9_10(matrix):
    s = ok(matrix, "torch==2.10.*", "jax[cuda12]")
    assert s.cudnn == "9.10.2.21" and {"torch", "jax"} <= set(s.packages)


def test_cuda_12_and_13_wheels_do_not_mix(matrix):
    reasons = refused(matrix, "torch==2.11.0+cu130", "tensorflow==2.21.*")
    assert "torch 2.11.x (cu130) uses CUDA 13 but tensorflow 2.21.x (and-cuda) uses CUDA 12" in reasons
    s = ok(matrix, "torch==2.11.0", "tensorflow==2.21.*")
    assert framework(s, "torch").variant in ("cu126", "cu128") and s.cuda.startswith("12.")


def test_tf_216_clashes_with_torch_24(matrix):
    reasons = refused(matrix, "tensorflow==2.16.*", "torch==2.4.*")
    assert "8.9.7.29" in reasons and "9.1.0.70" in reasons


def test_python_must_fit_every_framework(matrix):
    reasons = refused(matrix, "tensorflow==2.15.*", "jax>=0.11")
    assert "Python" in reasons


# ---------------------------------------------------------------- rule 4: companions

def test_torchvision_020_means_torch_251(matrix):
    s = ok(matrix, "torchvision==0.20.*")
    assert s.packages["torch"].startswith("2.5.1") and s.packages["torchvision"].startswith("0.20.1")


def test_companion_follows_torch_variant_label(matrix):
    s = ok(matrix, "torch==2.4.1+cu118", "torchvision")
    assert s.packages == {"torch": "2.4.1+cu118", "torchvision": "0.19.1+cu118", "nvidia-cudnn-cu11": "9.1.0.70"}
    assert s.index_urls == ("https://download.pytorch.org/whl/cu118",)


def test_companion_pin_conflict(matrix):
    reasons = refused(matrix, "torch==2.4.*", "torchvision==0.20.*")
    assert "torchvision==0.20.*" in reasons


# ---------------------------------------------------------------- rule 5: preference

def test_newest_everything_by_default(matrix):
    s = ok(matrix, "torch")
    versions = sorted({b.version for b in matrix.builds_of("torch")}, key=lambda v: tuple(map(int, v.split("."))))
    assert framework(s, "torch").version == versions[-1]


def test_newest_python_unless_pinned(matrix):
    assert ok(matrix, "torch==2.4.*").python == "3.12"
    s = ok(matrix, "torch==2.4.*", python="==3.11.*")
    assert s.python == "3.11" and s.python_install == "os" and s.base_image == "debian:bookworm-slim"


# ---------------------------------------------------------------- rule 6: plain CUDA stacks

def test_plain_cuda_stack_on_slim_uses_nvidia_wheels(matrix):
    s = ok(matrix, cuda="==12.8.*", python="==3.11.*")
    assert s.frameworks == () and s.flavour == "slim" and s.base_image == "debian:bookworm-slim"
    assert s.packages == {"nvidia-cuda-runtime-cu12": "12.8.*", "nvidia-cuda-nvrtc-cu12": "12.8.*"}


def test_plain_cuda_stack_with_cudnn(matrix):
    s = ok(matrix, cuda="==12.8.*", cudnn="==9.*")
    assert s.cudnn and s.cudnn.startswith("9.") and s.packages["nvidia-cudnn-cu12"] == s.cudnn


def test_plain_cuda_stack_on_runtime_uses_nvidia_image(matrix):
    s = ok(matrix, cuda="==12.8.*", flavour="runtime")
    assert s.base_image.startswith("nvidia/cuda:12.8.1-runtime-ubuntu") and s.packages == {}


def test_nothing_to_resolve_is_bad_input(matrix):
    with pytest.raises(InputError):
        resolve(matrix, Request(requirements=("numpy",)))


# ---------------------------------------------------------------- rule 7: base image

def test_slim_torch_stack_has_no_nvidia_base(matrix):
    s = ok(matrix, "torch==2.7.*")
    assert s.flavour == "slim" and "nvidia/cuda" not in s.base_image


def test_tf_210_needs_a_cuda_11_base_image(matrix):
    s = ok(matrix, "tensorflow==2.10.*")
    assert s.flavour == "runtime" and s.base_image.startswith("nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu")
    assert s.python == "3.10" and s.python_install == "os"
    assert any("11.8.0 is end-of-life" in w for w in s.warnings)
    reasons = refused(matrix, "tensorflow==2.10.*", refuse_eol_images=True)
    assert "11.2.2 is deleted" in reasons and "end-of-life (refuse_eol_images is set)" in reasons


def test_tf_210_cannot_be_slim(matrix):
    reasons = refused(matrix, "tensorflow==2.10.*", flavour="slim")
    assert "needs a system CUDA" in reasons


def test_devel_flavour_uses_devel_image(matrix):
    s = ok(matrix, "torch==2.7.*", flavour="devel", python="==3.12.*")
    assert s.base_image.startswith("nvidia/cuda:12.8.1-devel-ubuntu24.04")


# ---------------------------------------------------------------- unknown inputs

def test_unknown_release_is_explained(matrix):
    reasons = refused(matrix, "torch==3.0")
    assert "no torch release in the matrix matches torch==3.0" in reasons


def test_unverified_records_are_flagged(matrix):
    s = ok(matrix, "torch==2.15.*")
    assert any("unverified" in w for w in s.warnings)
