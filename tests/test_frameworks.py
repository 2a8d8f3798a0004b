"""Frameworks are data (matrices/frameworks.yaml): a new framework and a new CUDA major need no code.

The project overlay below declares a made-up framework, `fakenn`, written in the plugins
shape (one pip extra per CUDA major, like jax), and a made-up CUDA 14 with its toolkit, driver
branch and cuDNN wheel. Detection, the requirement split, the resolver, the lock's requirements
and `matrix show` all pick them up from the overlay alone.
"""

from __future__ import annotations

import json

import pytest

from cudabox.errors import InputError
from cudabox.knowledge import loader
from cudabox.knowledge.model import DriverVersion
from cudabox.project.survey import detect
from cudabox.resolve.request import Request
from cudabox.resolve.resolver import resolve
from tests.support import run_cli

OVERLAY = {
    "frameworks.yaml": """\
frameworks:
  - name: fakenn
    shape: plugins
    aliases: [fakenn-core]
    conda: [fakenn-gpu]
    extra: "gpu{major}"
    local_tag: "gpu{major}.cudnn{cudnn}"
    pypi_default: gpu14
    source: "tests/test_frameworks.py"
""",
    "fakenn.yaml": """\
releases:
  - versions: ["1.0.0", "1.1.0"]
    python: ">=3.10"
    source: "tests/test_frameworks.py"
    plugins:
      - {name: gpu14, cuda_major: 14, cuda: "14.0", cuda_min: "14.0", cudnn: ">=10.0,<11", min_cc: "8.0", source: "tests/test_frameworks.py"}
""",
    "cuda.yaml": """\
majors:
  - {major: 14, minor_compat_driver: "700.10.01", wheel_suffix: "", cudnn_wheel: nvidia-cudnn-cu14, tag: cu14, source: "tests/test_frameworks.py"}
toolkits:
  - version: "14.0"
    sass: [sm_80, sm_86, sm_89, sm_90, sm_100, sm_120]
    source: "tests/test_frameworks.py"
    releases:
      - {version: "14.0.0", label: "14.0 GA", driver: "700.10.01", source: "tests/test_frameworks.py"}
""",
    "drivers.yaml": """\
branches:
  - {branch: 700, cuda: "14.0", source: "tests/test_frameworks.py"}
""",
    "cudnn.yaml": """\
series:
  - series: "10.0"
    cuda: null
    min_cc: "7.5"
    builds:
      - {version: "10.0.1.5", wheels: [cu14]}
    source: "tests/test_frameworks.py"
""",
}


@pytest.fixture
def project(tmp_path):
    directory = tmp_path / "proj"
    overlay = directory / ".cudabox" / "matrices"
    overlay.mkdir(parents=True)
    for name, text in OVERLAY.items():
        (overlay / name).write_text(text)
    return directory


def test_bundled_frameworks_come_from_the_data():
    m = loader.load()
    assert m.frameworks.names == ("torch", "tensorflow", "jax", "paddle", "mxnet")
    assert [f.name for f in m.frameworks.frontends] == ["keras", "tf-keras"]
    assert m.frameworks.get("jaxlib").name == "jax" and m.frameworks.get("tensorflow-gpu").name == "tensorflow"
    assert m.frameworks.companions["torchvision"].name == "torch"
    torch, jax = m.frameworks.get("torch"), m.frameworks.get("jax")
    assert torch.local_for("12.1") == "cu121" and torch.cuda_of_local("cu118") == "11.8"
    assert jax.variant_of_local("cuda12.cudnn89") == "cuda12"
    assert {b.variant for b in m.builds_of("jax") if b.pypi_default} == {"cuda12"}
    assert {major.tag for major in m.majors.values()} == {"cu11", "cu12", "cu13"}


def test_a_made_up_framework_and_cuda_major_need_only_an_overlay(project):
    m = loader.load(project)
    assert m.frameworks.names == ("torch", "tensorflow", "jax", "paddle", "mxnet", "fakenn")
    assert m.majors[14].cudnn_wheel == "nvidia-cudnn-cu14"
    builds = m.builds_of("fakenn")
    assert [(b.version, b.variant, b.requirement, b.pypi_default) for b in builds] == [
        ("1.1.0", "gpu14", "fakenn[gpu14]==1.1.0", True), ("1.0.0", "gpu14", "fakenn[gpu14]==1.0.0", True)]

    wants, others = m.frameworks.split(["fakenn-core[gpu14_pip]==1.0.0", "numpy"])
    assert list(wants) == ["fakenn"] and wants["fakenn"].variant == "gpu14" and others == ["numpy"]

    stack = resolve(m, Request(requirements=("fakenn==1.*", "numpy"), driver=DriverVersion.parse("700.10.01"),
                               gpus=(m.gpu("H100"),)))
    assert [(f.name, f.version, f.variant) for f in stack.frameworks] == [("fakenn", "1.1.0", "gpu14")]
    assert stack.cuda == "14.0" and stack.cudnn == "10.0.1.5"
    assert "fakenn[gpu14]==1.1.0" in stack.requirements and "nvidia-cudnn-cu14==10.0.1.5" in stack.requirements


def test_detection_reads_the_overlay_frameworks(project):
    (project / "environment.yml").write_text("dependencies:\n  - python=3.11\n  - fakenn-gpu=1.0.0\n")
    (project / "requirements.txt").write_text("fakenn-core==1.0.0+gpu14.cudnn100\n")
    found = detect(project)
    assert "fakenn==1.0.0+gpu14.cudnn100" in found.requirements
    assert set(found.frameworks) == {"fakenn"}
    assert any("fakenn-core is fakenn" in note for note in found.notes)


def test_matrix_show_lists_the_new_framework(project):
    data = json.loads(run_cli("matrix", "show", "fakenn", "--json", "-C", str(project)).stdout)
    assert [b["requirement"] for b in data["builds"]] == ["fakenn[gpu14]==1.1.0", "fakenn[gpu14]==1.0.0"]


def test_bad_framework_records_fail_at_their_line(project):
    overlay = project / ".cudabox" / "matrices" / "frameworks.yaml"
    overlay.write_text("frameworks:\n  - {name: other, shape: plugins, source: x}\n")
    with pytest.raises(InputError, match=r"frameworks.yaml:2: framework other: shape plugins needs an 'extra'"):
        loader.load(project)
    overlay.write_text("frameworks:\n  - {name: other, shape: plugins, extra: 'gpu{mayor}', source: x}\n")
    with pytest.raises(InputError, match=r"frameworks.yaml:2: .*unknown field \{mayor\}"):
        loader.load(project)
    overlay.write_text("frameworks:\n  - {name: cuda, shape: variants, source: x}\n")
    with pytest.raises(InputError, match=r"'cuda' is a matrix subject"):
        loader.load(project)
