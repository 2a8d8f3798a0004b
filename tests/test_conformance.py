"""Issue #11 §4: resolve results checked against peers' published tables.

Each table below is transcribed (a representative slice, not the whole page) from the source named
above it, as read on 2026-11-22. The tests assert what cudabox resolves, not what its matrix files
say, so a wrong rule fails here even when the data is right. Where cudabox deliberately differs
from a table, the case carries a DIFFERS note saying why, and the test asserts cudabox's answer.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from cudabox.errors import InputError, Unsatisfiable
from cudabox.knowledge import loader
from cudabox.resolve.resolver import resolve

from .test_resolve import framework, req


@pytest.fixture(scope="module")
def m():
    return loader.load()


def stack(m, *requirements, **kw):
    return resolve(m, req(m, *requirements, **kw))


def refused(m, *requirements, **kw) -> str:
    with pytest.raises(Unsatisfiable) as err:
        stack(m, *requirements, **kw)
    return "\n".join(err.value.reasons)


# ------------------------------------------------------------------ PyTorch RELEASE.md
# Source: pytorch/pytorch RELEASE.md, "Release Compatibility Matrix"
# (https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix), read through a
# verbatim copy of the table (a translated RELEASE.md that keeps the table in English); rows 1.12-2.14.
# Columns kept: series, Python (stable range), and every CUDA of "Stable CUDA" and "Experimental CUDA"
# with the cuDNN the row names (None where the row names none for that CUDA).
TORCH_RELEASE_MD = [
    ("2.14", "3.10", "3.14", [("12.6", "9.10.2.21"), ("13.0", "9.24.0.43"), ("13.2", "9.24.0.43")]),
    ("2.13", "3.10", "3.14", [("12.6", "9.10.2.21"), ("13.0", "9.20.0.48"), ("13.2", "9.20.0.48")]),
    ("2.12", "3.10", "3.14", [("12.6", "9.10.2.21"), ("13.0", "9.20.0.48"), ("13.2", "9.20.0.48")]),
    ("2.11", "3.10", "3.14", [("12.6", "9.10.2.21"), ("12.8", "9.17.1.4"), ("13.0", "9.17.1.4")]),
    ("2.10", "3.10", "3.14", [("12.6", "9.10.2.21"), ("12.8", "9.10.2.21"), ("13.0", "9.15.1.9")]),
    ("2.9", "3.10", "3.14", [("12.6", "9.10.2.21"), ("12.8", "9.10.2.21"), ("13.0", "9.13.0.50")]),
    ("2.8", "3.9", "3.13", [("12.6", "9.10.2.21"), ("12.8", "9.10.2.21"), ("12.9", "9.10.2.21")]),
    ("2.7", "3.9", "3.13", [("11.8", "9.1.0.70"), ("12.6", "9.5.1.17"), ("12.8", "9.7.1.26")]),
    ("2.6", "3.9", "3.13", [("11.8", None), ("12.4", "9.1.0.70"), ("12.6", "9.5.1.17")]),
    ("2.5", "3.9", "3.12", [("11.8", "9.1.0.70"), ("12.1", "9.1.0.70"), ("12.4", "9.1.0.70")]),
    ("2.4", "3.8", "3.12", [("11.8", "9.1.0.70"), ("12.1", "9.1.0.70"), ("12.4", "9.1.0.70")]),
    ("2.3", "3.8", "3.11", [("11.8", "8.7.0.84"), ("12.1", "8.9.2.26")]),
    ("2.2", "3.8", "3.11", [("11.8", "8.7.0.84"), ("12.1", "8.9.2.26")]),
    ("2.1", "3.8", "3.11", [("11.8", "8.7.0.84"), ("12.1", "8.9.2.26")]),
    ("2.0", "3.8", "3.11", [("11.7", "8.5.0.96"), ("11.8", "8.7.0.84")]),
    ("1.13", "3.7", "3.10", [("11.6", "8.3.2.44"), ("11.7", "8.5.0.96")]),
    ("1.12", "3.7", "3.10", [("11.3", "8.3.2.44"), ("11.6", "8.3.2.44")]),
]

# Where cudabox's stack differs from the table's cuDNN, and why.
TORCH_CUDNN_DIFFERS = {
    # DIFFERS: the 2.11.0 wheel on PyPI (the cu130 build) pins nvidia-cudnn-cu13==9.19.0.56; cudabox
    # installs what the wheel's metadata pins (what pip will install), not the table's 9.17.1.4.
    ("2.11", "13.0"): "9.19.0.56",
    # DIFFERS: 1.12 wheels carry cuDNN inside the wheel (no nvidia-cudnn dependency); cudabox installs no
    # separate cuDNN, so the stack names none.
    ("1.12", "11.3"): None,
    ("1.12", "11.6"): None,
}


@pytest.mark.parametrize("series,py_min,py_max,cudas", TORCH_RELEASE_MD, ids=[r[0] for r in TORCH_RELEASE_MD])
def test_every_cuda_of_a_torch_release_resolves_with_its_cudnn(m, series, py_min, py_max, cudas):
    for cuda, cudnn in cudas:
        s = stack(m, f"torch=={series}.*", cuda=f"=={cuda}.*")
        assert framework(s, "torch").variant == "cu" + cuda.replace(".", ""), (series, cuda)
        assert s.cuda == cuda
        want = TORCH_CUDNN_DIFFERS.get((series, cuda), cudnn)
        if want is not None or (series, cuda) in TORCH_CUDNN_DIFFERS:
            assert s.cudnn == want, (series, cuda)


@pytest.mark.parametrize("series,py_min,py_max,cudas", TORCH_RELEASE_MD, ids=[r[0] for r in TORCH_RELEASE_MD])
def test_torch_python_range_of_the_table_resolves(m, series, py_min, py_max, cudas):
    for python in (py_min, py_max):
        assert stack(m, f"torch=={series}.*", python=f"=={python}.*").python == python


@pytest.mark.parametrize("series,python", [
    # DIFFERS: the table calls these "experimental" (or omits them); cudabox reads Python support from the
    # Linux x86_64 wheels' tags (issue #11 §1), and these wheels exist on PyPI.
    ("1.13", "3.11"), ("2.2", "3.12"), ("2.3", "3.12"), ("2.5", "3.13"),
])
def test_torch_python_beyond_the_table_comes_from_wheel_tags(m, series, python):
    assert stack(m, f"torch=={series}.*", python=f"=={python}.*").python == python


def test_torch_variant_outside_the_table_is_refused(m):
    assert "outside cuda ==12.2.*" in refused(m, "torch==2.4.*", cuda="==12.2.*")


# ------------------------------------------------------------------ PyTorch previous versions (variants + companions)
# Source: pytorch/pytorch.github.io _get_started/previous-versions.md at 04862e37
# (https://pytorch.org/get-started/previous-versions/), "Wheel -> Linux and Windows": the pip lines per
# release, with the torchvision/torchaudio each names and the CUDA variants of the index. "Linux CUDA
# 11.7: pip install torch==2.0.1 ..." (no index) says which variant plain pip gives.
PREVIOUS_VERSIONS = [
    ("2.0.1", "0.15.2", "2.0.2", ["cu117", "cu118"], "cu117"),
    ("2.0.0", "0.15.1", "2.0.1", ["cu117", "cu118"], "cu117"),
    ("1.13.1", "0.14.1", "0.13.1", ["cu116", "cu117"], "cu117"),
    ("1.13.0", "0.14.0", "0.13.0", ["cu116", "cu117"], "cu117"),
    # DIFFERS: the page also lists cu102 for 1.12.x; cudabox's CUDA data starts at 11.0 (no CUDA 10
    # toolkit, driver or image records), so cu102 builds are not offered.
    ("1.12.1", "0.13.1", "0.12.1", ["cu113", "cu116"], None),
    ("1.12.0", "0.13.0", "0.12.0", ["cu113", "cu116"], None),
]


@pytest.mark.parametrize("torch,vision,audio,variants,default", PREVIOUS_VERSIONS,
                         ids=[r[0] for r in PREVIOUS_VERSIONS])
def test_torch_variants_pair_with_the_published_companions(m, torch, vision, audio, variants, default):
    for variant in variants:
        s = stack(m, f"torch=={torch}+{variant}", "torchvision", "torchaudio")
        # the pip-default variant comes from PyPI untagged, as the page's "Linux CUDA 11.7" line installs it
        assert s.packages["torch"] == (torch if variant == default else f"{torch}+{variant}")
        assert Version(s.packages["torchvision"]).public == vision
        assert Version(s.packages["torchaudio"]).public == audio
    if default is not None:
        # plain pip's variant is the one cudabox installs untagged from PyPI
        assert next(b for b in m.builds_of("torch") if b.version == torch and b.pypi_default).variant == default
        # DIFFERS (resolver rule 5): with no driver known cudabox picks the newest variant of pip's CUDA
        # major (2.0.x: cu118 where pip gives cu117), never a newer major
        picked = framework(stack(m, f"torch=={torch}"), "torch").variant
        assert picked == max(variants, key=lambda v: int(v[2:])) and picked[:4] == default[:4]


def test_companion_pin_selects_the_published_torch(m):
    # the page's torchvision==0.15.2 line installs torch 2.0.1
    assert stack(m, "torch", "torchvision==0.15.2").packages["torch"].startswith("2.0.1")


# ------------------------------------------------------------------ TensorFlow tested build configurations
# Source: tensorflow/docs site/en/install/source.md at 7c365021, "Tested build configurations -> Linux ->
# GPU" (https://www.tensorflow.org/install/source#gpu): version, Python, cuDNN, CUDA.
TF_TESTED = [
    ("2.21.0", "3.10", "3.13", "9.3", "12.5"),
    ("2.20.0", "3.9", "3.13", "9.3", "12.5"),
    ("2.19.0", "3.9", "3.12", "9.3", "12.5"),
    ("2.18.0", "3.9", "3.12", "9.3", "12.5"),
    ("2.17.0", "3.9", "3.12", "8.9", "12.3"),
    ("2.16.1", "3.9", "3.12", "8.9", "12.3"),
    ("2.15.0", "3.9", "3.11", "8.9", "12.2"),
    ("2.14.0", "3.9", "3.11", "8.7", "11.8"),
    ("2.13.0", "3.8", "3.11", "8.6", "11.8"),
    ("2.12.0", "3.8", "3.11", "8.6", "11.8"),
    ("2.11.0", "3.7", "3.10", "8.1", "11.2"),
    ("2.10.0", "3.7", "3.10", "8.1", "11.2"),
    ("2.9.0", "3.7", "3.10", "8.1", "11.2"),
    ("2.8.0", "3.7", "3.10", "8.1", "11.2"),
    ("2.7.0", "3.7", "3.9", "8.1", "11.2"),
    ("2.6.0", "3.6", "3.9", "8.1", "11.2"),
    ("2.5.0", "3.6", "3.9", "8.1", "11.2"),
]


@pytest.mark.parametrize("version,py_min,py_max,cudnn,cuda", TF_TESTED, ids=[r[0] for r in TF_TESTED])
def test_tensorflow_resolves_to_its_tested_configuration(m, version, py_min, py_max, cudnn, cuda):
    s = stack(m, f"tensorflow=={version}")
    build = next(b for b in m.builds_of("tensorflow") if b.version == version
                 and b.variant == framework(s, "tensorflow").variant)
    assert build.cuda == cuda
    if build.wheels_cuda:
        if Version(version) < Version("2.20"):
            assert s.cuda == cuda and s.cudnn.startswith(cudnn + "."), (s.cuda, s.cudnn)
        else:
            # DIFFERS: from 2.20 [and-cuda] pins ranges (CUDA >= 12.5.82 < 13, cuDNN >= 9.3.0.75 < 10);
            # the stack's CUDA is the tested 12.5, its cuDNN the newest 9.x the pins allow (what pip
            # installs), not 9.3 itself.
            assert s.cuda == cuda and s.cudnn.split(".")[0] == "9" and Version(s.cudnn) >= Version("9.3")
    else:
        # system CUDA: an nvidia/cuda image of the same major at or above the tested CUDA, whose cuDNN
        # has the tested cuDNN's major (minor-version compatibility within the major)
        assert s.base_image.startswith("nvidia/cuda:11.")
        assert Version(s.cuda) >= Version(cuda) and s.cudnn.split(".")[0] == cudnn.split(".")[0]


# DIFFERS: cudabox reads a release's Pythons from the Linux x86_64 wheel tags on PyPI (issue #11 §1); its
# data records no wheel of these releases for the table's oldest Python, so that Python is refused.
# And 2.14.0 on 3.11: the table is TF built on system CUDA; cudabox builds 2.14 from its [and-cuda] wheels,
# which pin tensorrt==8.5.3.1, a wheel for CPython <= 3.10 only (PyPI), so 3.11 can't be installed that way.
TF_PYTHON_DIFFERS = {("2.11.0", "3.7"), ("2.6.0", "3.6"), ("2.5.0", "3.6"), ("2.14.0", "3.11")}


@pytest.mark.parametrize("version,py_min,py_max,cudnn,cuda", TF_TESTED, ids=[r[0] for r in TF_TESTED])
def test_tensorflow_python_range_of_the_table_resolves(m, version, py_min, py_max, cudnn, cuda):
    for python in (py_min, py_max):
        if (version, python) in TF_PYTHON_DIFFERS:
            assert "supports Python" in refused(m, f"tensorflow=={version}", python=f"=={python}.*")
            continue
        assert stack(m, f"tensorflow=={version}", python=f"=={python}.*").python == python


def test_tensorflow_24_is_refused_for_its_soname_not_silently_moved(m):
    # Source row: tensorflow-2.4.0 | 3.6-3.8 | cuDNN 8.0 | CUDA 11.0.
    # DIFFERS: the table's configuration is right, but NVIDIA deleted the CUDA 11.0 image and TF 2.4 can't
    # run on 11.1+ (libcusolver.so.10), so cudabox refuses instead of picking an 11.8 image.
    assert "libcusolver.so.10" in refused(m, "tensorflow==2.4.0")


# ------------------------------------------------------------------ JAX installation notes and changelog
# Source: jax-ml/jax docs/installation.md at 00528b98 ("NVIDIA GPU": SM >= 5.2; driver >= 525.60.13 for
# CUDA 12 on Linux; the CUDA wheel variant built with CUDA 12.3 / cuDNN 9.0 is "compatible with CUDA
# >= 12.1, cuDNN >= 9.0, < 10.0"), and CHANGELOG.md at 032afca9 (jaxlib 0.4.26: "JAX now supports CUDA
# 12.1 or newer only. Support for CUDA 11.8 has been dropped."; jaxlib 0.4.30: monolithic CUDA jaxlibs
# dropped, `pip install jax[cuda12]` or `jax[cuda12_local]`).
JAX = "jax[cuda12]==0.4.30"


@pytest.mark.parametrize("kw,ok", [
    (dict(gpus=("5.2",), driver="525.60.13"), True),   # SM 5.2 (Maxwell) on the documented driver floor
    (dict(gpus=("H100",), driver="525.60.13"), True),
    (dict(gpus=("K80",), driver="525.60.13"), False),  # Kepler: not supported
    (dict(gpus=("H100",), driver="520.61.05"), False),  # below 525.60.13
    (dict(cuda="==12.1.*"), True),                      # compatible with CUDA >= 12.1
    (dict(cuda="==12.3.*"), True),
    (dict(cuda="==12.0.*"), False),
    (dict(cuda="==11.8.*"), False),                     # CUDA 11.8 dropped in 0.4.26
])
def test_jax_installation_notes(m, kw, ok):
    if ok:
        s = stack(m, JAX, **kw)
        assert s.cudnn.split(".")[0] == "9"  # cuDNN >= 9.0, < 10.0
        if "cuda" in kw:
            assert s.cuda == kw["cuda"][2:-2]
    else:
        refused(m, JAX, **kw)


@pytest.mark.parametrize("text", ["jax[cuda12_local]==0.4.30", "jax[cuda12]==0.4.30"])
def test_jax_plugin_extras_of_the_changelog_resolve(m, text):
    assert framework(stack(m, text), "jax").variant == "cuda12"


def test_jax_cuda11_extra_is_gone(m):
    with pytest.raises(InputError):
        stack(m, "jax[cuda11]==0.4.30")


# ------------------------------------------------------------------ NVIDIA driver tables
# Source: CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions" (Linux
# x86_64, "GA" rows; https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html), and the CUDA
# compatibility guide's minor-version-compatibility floors per major
# (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).
NVIDIA_GA_DRIVERS = [
    ("11.8", "520.61.05"), ("12.0", "525.60.13"), ("12.1", "530.30.02"), ("12.2", "535.54.03"),
    ("12.3", "545.23.06"), ("12.4", "550.54.14"), ("12.5", "555.42.02"), ("12.6", "560.28.03"),
    ("12.8", "570.26"), ("12.9", "575.51.03"), ("13.0", "580.65.06"),
]
# (CUDA, the major's floor, how the floor driver runs it, a driver just below the floor)
MINOR_COMPAT_FLOORS = [("11.8", "450.80.02", "minor-compat", "450.51.06"),
                       ("12.8", "525.60.13", "minor-compat", "520.61.05"),
                       ("13.0", "580.65.06", "native", "575.51.03")]


@pytest.mark.parametrize("cuda,driver", NVIDIA_GA_DRIVERS)
def test_plain_cuda_stack_needs_the_ga_driver(m, cuda, driver):
    s = stack(m, cuda=f"=={cuda}.*")
    assert (s.cuda, s.min_driver, s.requirement) == (cuda, driver, f"cuda>={cuda}")
    assert stack(m, cuda=f"=={cuda}.*", driver=driver).driver_mode == "native"


@pytest.mark.parametrize("cuda,floor,mode,below", MINOR_COMPAT_FLOORS)
def test_minor_version_compatibility_floor(m, cuda, floor, mode, below):
    s = stack(m, cuda=f"=={cuda}.*", driver=floor, gpus=("A100",))
    assert (s.driver_mode, s.min_driver) == (mode, floor)
    assert f"driver {below} runs CUDA" in refused(m, cuda=f"=={cuda}.*", driver=below, gpus=("A100",))
