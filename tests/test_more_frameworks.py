"""Issue #19: PaddlePaddle, Keras 3 and MXNet, each mostly data (matrices/frameworks.yaml) plus a small rule.

Table-driven: each row is a request and what the bundled matrix must make of it.
"""

from __future__ import annotations

import shutil

import pytest

from cudabox.errors import InputError
from cudabox.knowledge import loader
from cudabox.resolve.resolver import pair_conflict, resolve

from .support import REPO
from .test_resolve import framework, req
from .test_rules import refusal


@pytest.fixture(scope="module")
def m():
    return loader.load()


def stack(m, *requirements, **kw):
    return resolve(m, req(m, *requirements, **kw))


# ---------------------------------------------------------------- PaddlePaddle


@pytest.mark.parametrize("requirement,kw,variant,pip,index", [
    # PyPI's build is CUDA 11.8, whose nvidia/cuda images are end-of-life: refusing those (rule 8's strict
    # setting) gives the CUDA 12.0 build from Paddle's index
    ("paddlepaddle-gpu==2.6.2", {"refuse_eol_images": True}, "cu120", "paddlepaddle-gpu==2.6.2.post120",
     "https://www.paddlepaddle.org.cn/packages/stable/cu120/"),
    # EOL images are used (with a warning) by default; no driver known: no newer CUDA major than PyPI's build
    ("paddlepaddle-gpu==2.6.2", {}, "cu118", "paddlepaddle-gpu==2.6.2", None),
    # the post tag picks the build; PyPI's own build needs no index
    ("paddlepaddle-gpu==2.6.2.post117", {}, "cu117", "paddlepaddle-gpu==2.6.2.post117",
     "https://www.paddlepaddle.org.cn/packages/stable/cu117/"),
    ("paddlepaddle-gpu==2.6.1", {"cuda": "==11.8.*"}, "cu118",
     "paddlepaddle-gpu==2.6.1", None),
    # 3.x lives on Paddle's index only: same version string, the index picks the CUDA build
    ("paddlepaddle-gpu==3.0.0", {}, "cu126", "paddlepaddle-gpu==3.0.0",
     "https://www.paddlepaddle.org.cn/packages/stable/cu126/"),
    ("paddlepaddle-gpu>=3", {"cuda": "<12"}, "cu118", "paddlepaddle-gpu==3.0.0",
     "https://www.paddlepaddle.org.cn/packages/stable/cu118/"),
])
def test_paddle_builds(m, requirement, kw, variant, pip, index):
    s = stack(m, requirement, **kw)
    f = framework(s, "paddle")
    assert f.variant == variant
    assert pip in s.requirements
    assert (index in s.index_urls) if index else not any("paddlepaddle" in u for u in s.index_urls)
    assert s.flavour == "runtime" and s.cudnn  # CUDA and cuDNN from the system: a cuDNN runtime image
    name, _, version = pip.partition("==")
    assert s.packages[name] == version  # by distribution name: the smoke test checks what pip installed


def test_paddle_cpu_stays_cpu(m):
    with pytest.raises(InputError, match="nothing to resolve"):
        stack(m, "paddlepaddle==2.6.2")
    s = stack(m, "paddlepaddle==2.6.2", cuda="==12.8.*")
    assert not s.frameworks and "paddlepaddle==2.6.2" not in s.requirements


@pytest.mark.parametrize("requirement,gpu,words", [
    ("paddlepaddle-gpu==3.0.0", "K80", "CC >= 6.0"),  # 3.x: GPU computing power over 6.0
])
def test_paddle_gpu_floor(m, requirement, gpu, words):
    assert words in refusal(m, requirement, gpus=(gpu,))


def test_paddle_2_6_runs_on_kepler(m):
    assert framework(stack(m, "paddlepaddle-gpu==2.6.2", gpus=("K80",)), "paddle").version == "2.6.2"


def test_paddle_and_torch_share_one_cudnn(m):
    """paddle's cuDNN comes from the system, torch's from a wheel: the same libcudnn.so.8 must be new enough."""
    torch = next(b for b in m.builds_of("torch") if b.version == "2.0.1" and b.variant == "cu117")  # cuDNN 8.5 wheel
    p118 = next(b for b in m.builds_of("paddle") if b.version == "2.6.2" and b.variant == "cu118")  # system 8.6
    p117 = next(b for b in m.builds_of("paddle") if b.version == "2.6.2" and b.variant == "cu117")  # system 8.4
    kind, text = pair_conflict(m, p118, torch)
    assert kind == "cudnn" and "libcudnn.so.8" in text and "8.6" in text
    assert pair_conflict(m, p117, torch) is None
    s = stack(m, "torch==2.0.1+cu117", "paddlepaddle-gpu==2.6.2")
    assert framework(s, "paddle").variant == "cu117"


def test_paddle_and_tensorflow_need_one_cuda_major(m):
    reasons = refusal(m, "tensorflow==2.10.0", "paddlepaddle-gpu==2.6.2.post120")
    assert "CUDA 11" in reasons and "CUDA 12" in reasons


@pytest.mark.parametrize("requirements,named", [
    (("paddlepaddle-gpu==2.6.2.post112", "paddlepaddle-gpu==2.6.2.post120"), ("cu112", "cu120")),
])
def test_paddle_two_post_tags_are_refused(m, requirements, named):
    reasons = refusal(m, *requirements)
    assert all(n in reasons for n in named)


# ---------------------------------------------------------------- Keras


@pytest.mark.parametrize("requirements,env,backend,spec_words", [
    (("keras>=3",), {"KERAS_BACKEND": "jax"}, "jax", "KERAS_BACKEND=jax from cudabox.yaml env:"),
    (("keras==3.15.1",), {"KERAS_BACKEND": "torch"}, "torch", "KERAS_BACKEND=torch"),
    (("keras>=3", "jax[cuda12]"), {}, "jax", "the requirements name jax, its only backend there"),
    (("keras>=3",), {}, "tensorflow", "no KERAS_BACKEND set: keras's default"),
    (("keras>=3", "torch", "jax"), {}, "tensorflow", "the requirements name 2 backends"),
    (("keras<3",), {"KERAS_BACKEND": "jax"}, "tensorflow", "run on tensorflow only"),
    (("tf-keras==2.17.0",), {}, "tensorflow", "tensorflow==2.17.*"),
])
def test_keras_backend(m, requirements, env, backend, spec_words):
    s = stack(m, *requirements, env=tuple(env.items()))
    assert backend in s.framework_names
    line = next(w for w in s.why if w.startswith(requirements[0] + ": backend"))
    assert spec_words in line and f"backend {backend}" in line
    assert requirements[0] not in s.requirements  # the frontend itself is the project's requirement, passed to pip


@pytest.mark.parametrize("requirement,tf", [("keras<3", "2.15.1"), ("keras==2.15.0", "2.15.1"),
                                             ("tf-keras==2.17.0", "2.17.1"), ("tf-keras", "2.21.0")])
def test_keras_2_pairs_with_tensorflow(m, requirement, tf):
    assert framework(stack(m, requirement), "tensorflow").version == tf


def test_keras_numpy_backend_needs_no_cuda(m):
    with pytest.raises(InputError, match="nothing to resolve"):
        stack(m, "keras>=3", env=(("KERAS_BACKEND", "numpy"),))


def test_keras_unknown_backend_is_bad_input(m):
    with pytest.raises(InputError, match=r"KERAS_BACKEND=tensorflw: keras backends are tensorflow, jax, torch"):
        stack(m, "keras>=3", env=(("KERAS_BACKEND", "tensorflw"),))


def test_keras_backend_must_agree_with_a_pinned_framework(m):
    s = stack(m, "keras>=3", "jax==0.6.0", env=(("KERAS_BACKEND", "jax"),))
    assert framework(s, "jax").version == "0.6.0"


# ---------------------------------------------------------------- MXNet


def test_mxnet_is_refused_with_the_images_and_the_retirement(m):
    reasons = refusal(m, "mxnet-cu112==1.9.1", refuse_eol_images=True)
    assert "nvidia/cuda 11.2.2 is deleted" in reasons
    assert "end-of-life (refuse_eol_images is set)" in reasons
    assert "mxnet: Apache MXNet is retired" in reasons


@pytest.mark.parametrize("requirement,variant,image", [
    ("mxnet-cu112==1.9.1", "cu112", "11.8.0"),  # 11.2 is deleted: the newest CUDA 11 image, minor-version compatible
    ("mxnet-cu117", "cu117", "11.7.1"),
    ("mxnet-cu110==1.9.*", "cu110", "11.8.0"),
])
def test_mxnet_on_end_of_life_images(m, requirement, variant, image):
    s = stack(m, requirement)
    f = framework(s, "mxnet")
    assert (f.version, f.variant) == ("1.9.1", variant)
    assert s.base_image.startswith(f"nvidia/cuda:{image}-cudnn8-runtime")
    assert s.python == "3.8"  # the PyPI classifiers stop at 3.8
    assert f"mxnet-{variant}==1.9.1" in s.requirements
    assert any("Apache MXNet is retired" in w for w in s.warnings)


def test_mxnet_cpu_stays_cpu(m):
    with pytest.raises(InputError, match="nothing to resolve"):
        stack(m, "mxnet==1.9.1")


def test_mxnet_and_torch_share_cuda_11(m):
    s = stack(m, "torch", "mxnet-cu112==1.9.1")
    assert s.cuda.startswith("11.") and framework(s, "torch").variant.startswith("cu11")


def test_mxnet_two_packages_are_two_variants(m):
    reasons = refusal(m, "mxnet-cu112==1.9.1", "mxnet-cu117==1.9.1")
    assert "cu112" in reasons and "cu117" in reasons


# ---------------------------------------------------------------- init on the fixture projects (no engine)


PROJECTS = REPO / "tests" / "fixtures" / "projects"


def _init(tmp_path, name):
    from cudabox.lock.init import plan_init, write_plan
    from cudabox.project.survey import detect

    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    plan = plan_init(project, detect(project), no_host=True, packages=False)  # offline: Paddle's index is unreachable
    write_plan(plan)
    return project, plan


def test_init_paddleocr_project(tmp_path):
    from cudabox.lock.lockfile import read_lock

    project, plan = _init(tmp_path, "paddleocr-requirements")
    stack = read_lock(project).stack
    assert [(f.name, f.version, f.variant) for f in stack.frameworks] == [("paddle", "3.0.0", "cu126")]
    assert stack.index_urls == ("https://www.paddlepaddle.org.cn/packages/stable/cu126/",)
    assert stack.requirements == ("paddlepaddle-gpu==3.0.0",) and stack.os_packages == ("libgomp1",)
    assert stack.base_image.startswith("nvidia/cuda:12.6") and "cudnn" in stack.base_image
    text = (project / "cudabox.yaml").read_text()
    assert 'cuda: "12.6"' in text and "(index https://www.paddlepaddle.org.cn/packages/stable/cu126/)" in text
    assert any("paddle 3.0.0 (cu126): matrix record is unverified" in w for w in plan.resolution.stack.warnings)


def test_init_keras_project_takes_its_backend_from_the_project(tmp_path):
    from cudabox.lock.lockfile import read_lock
    from cudabox.project.spec import load_spec

    project, plan = _init(tmp_path, "keras-jax")
    assert dict(load_spec(project).env) == {"KERAS_BACKEND": "jax"}
    assert "# From .env:2: it also picks the backend" in (project / "cudabox.yaml").read_text()
    stack = read_lock(project).stack
    assert stack.framework_names == ("jax",)
    assert any(w.startswith("keras>=3.5: backend jax (KERAS_BACKEND=jax from cudabox.yaml env:)")
               for w in plan.resolution.stack.why)


def test_keras_backend_set_in_python_is_detected(tmp_path):
    from cudabox.project.survey import detect

    (tmp_path / "requirements.txt").write_text("keras>=3\ntorch\n")
    (tmp_path / "main.py").write_text('import os\nos.environ["KERAS_BACKEND"] = "torch"\nimport keras\n')
    (tmp_path / "other.py").write_text('import os\nos.environ.setdefault("KERAS_BACKEND", "jax")\n')
    found = detect(tmp_path)
    assert found.env == {"KERAS_BACKEND": "torch"} and found.env_from == {"KERAS_BACKEND": "main.py:2"}
    assert any("other.py:2: sets KERAS_BACKEND=jax, but main.py:2 sets torch; kept torch" in n for n in found.notes)


def test_init_mxnet_project_is_refused_with_the_reasons(tmp_path):
    from cudabox.errors import Unsatisfiable
    from cudabox.lock.init import plan_init
    from cudabox.project.survey import detect

    project = tmp_path / "mxnet-legacy"
    shutil.copytree(PROJECTS / "mxnet-legacy", project)
    found = detect(project)
    assert "mxnet-cu112==1.9.1" in found.requirements and found.python == "3.8"
    plan = plan_init(project, found, no_host=True, refuse_eol_images=True, packages=False)
    assert isinstance(plan.error, Unsatisfiable) and plan.error.exit_code == 3
    reasons = "\n".join(plan.error.reasons)
    assert "nvidia/cuda 11.2.2 is deleted" in reasons and "refuse_eol_images is set" in reasons
    assert "Apache MXNet is retired" in reasons
    assert "cudabox.lock" not in plan.files  # no lock; cudabox.yaml carries the reasons at its top
    assert "Apache MXNet is retired" in plan.files["cudabox.yaml"]
    s = resolve(loader.load(), req(loader.load(), *found.requirements, python="==3.8.*"))
    assert framework(s, "mxnet").variant == "cu112" and s.python == "3.8"


# ---------------------------------------------------------------- matrix refresh learns paddlepaddle-gpu releases


def test_refresh_adds_new_paddle_releases(tmp_path):
    import json

    from cudabox.knowledge.overlay import load_documents
    from cudabox.knowledge.pypi import Client, FixtureTransport
    from cudabox.knowledge.refresh.plan import plan

    root = tmp_path / "pypi"
    shutil.copytree(REPO / "tests" / "fixtures" / "pypi", root)
    doc = json.loads((root / "paddlepaddle-gpu.json").read_text())
    for version in ("2.6.3", "2.7.0"):  # SYNTHETIC releases made by this test (not on PyPI)
        doc["releases"][version] = [
            {"filename": f"paddlepaddle_gpu-{version}-{t}-manylinux1_x86_64.whl", "yanked": False,
             "url": f"https://files.pythonhosted.org/packages/synthetic/paddlepaddle_gpu-{version}-{t}.whl",
             "upload_time_iso_8601": "2026-12-01T00:00:00Z"} for t in ("cp311-cp311", "cp312-cp312")]
    (root / "paddlepaddle-gpu.json").write_text(json.dumps(doc))
    result = plan(Client(FixtureTransport(root), cache_dir=tmp_path / "cache"), load_documents(None), ["paddle"])
    changes = {c.label: c for c in result.changes}
    assert changes["paddle 2.6"].adds() == ["2.6.3"]
    new = changes["paddle 2.7"].new
    assert new["status"] == "inferred" and new["python"] == ["3.11", "3.12"] and new["pypi_default"] == "cu118"
    assert [v["name"] for v in new["variants"]] == ["cu112", "cu116", "cu117", "cu118", "cu120"]
    assert "carried from paddle 2.6" in new["note"]
