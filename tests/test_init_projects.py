"""`cudabox init` on projects shaped like real ones (tests/fixtures/projects, issue #12).

One fixture per shape: what init detected, the cudabox.yaml it wrote (with its lock, or with
the reasons at the top on exit 2/3), and the failing cases. Pure logic except the CLI runs,
which use the real console script (no engine: --no-host).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from cudabox.errors import InputError
from cudabox.lock.init import plan_init, write_plan
from cudabox.lock.lockfile import is_stale, read_lock
from cudabox.project.spec import load_spec
from cudabox.project.survey import detect
from tests.support import REPO, run_cli

PROJECTS = REPO / "tests" / "fixtures" / "projects"


def copy(tmp_path: Path, name: str) -> Path:
    shutil.copytree(PROJECTS / name, tmp_path / name)
    return tmp_path / name


def init(project: Path, **flags):
    """Detect, plan and write, as `cudabox init --yes --no-host` does; returns (plan, cudabox.yaml parsed)."""
    plan = plan_init(project, detect(project, **flags), no_host=True, packages=False)  # no framework index here
    write_plan(plan)
    return plan, yaml.safe_load((project / "cudabox.yaml").read_text())


def locked(project: Path):
    """The lock init wrote is fresh against the cudabox.yaml it wrote (run will not re-lock)."""
    spec, lock = load_spec(project), read_lock(project)
    assert spec.inputs_hash == lock.inputs_hash
    return spec, lock


# --------------------------------------------------------------------------- requirements layouts


def test_requirements_folder_takes_the_gpu_variant_and_names_the_rest(tmp_path):
    project = copy(tmp_path, "vllm-requirements-dir")
    plan, doc = init(project)
    found = plan.detected
    assert found.sources == ["requirements/cuda.txt", "requirements/common.txt"]
    assert "ray[cgraph]>=2.48.0" in found.requirements  # the extra survives
    assert found.references == ["requirements/cuda.txt"]
    assert doc["requirements_file"] == "requirements/cuda.txt" and "requirements" not in doc
    unused = "\n".join(found.unused)
    for name in ("dev.txt", "docs.txt", "test.txt", "cpu.txt"):
        assert f"requirements/{name}" in unused
    assert any("read requirements/cuda.txt (the GPU variant)" in n for n in found.notes)
    spec, lock = locked(project)
    assert "ray[cgraph]>=2.48.0" in lock.project.requirements
    assert [f.name for f in lock.stack.frameworks] == ["torch"] and lock.stack.frameworks[0].version == "2.9.0"
    text = (project / "cudabox.yaml").read_text()
    assert "# Not used: requirements/cpu.txt: another variant" in text


def test_requirements_variant_can_be_chosen(tmp_path):
    project = copy(tmp_path, "vllm-requirements-dir")
    asked = []
    found = detect(project, choose=lambda variants, default: asked.append((variants, default)) or
                   "requirements/cpu.txt")
    assert asked == [(["requirements/cpu.txt", "requirements/cuda.txt"], "requirements/cuda.txt")]
    assert "torch==2.9.0+cpu" in found.requirements and found.references == ["requirements/cpu.txt"]
    assert any("requirements/cuda.txt: another variant" in u for u in found.unused)


def test_top_level_variants_without_requirements_txt(tmp_path):
    project = copy(tmp_path, "variants-gpu-cpu")
    plan, doc = init(project)
    assert plan.detected.requirements == ["jax[cuda12]==0.6.0", "optax"]
    assert doc["requirements_file"] == "requirements-gpu.txt"
    assert any(u.startswith("requirements-dev.txt: development") for u in plan.detected.unused)
    _, lock = locked(project)
    assert lock.stack.frameworks[0].name == "jax"


def test_from_reads_one_file_and_with_adds(tmp_path):
    project = copy(tmp_path, "vllm-requirements-dir")
    found = detect(project, from_file=project / "requirements" / "cpu.txt", with_=("einops>=0.8",))
    assert found.requirements[-1] == "einops>=0.8" and found.origins["einops>=0.8"] == "--with"
    assert "torch==2.9.0+cpu" in found.requirements
    assert any("other files were not read" in n for n in found.notes)
    with pytest.raises(InputError, match="--from nope.txt: file not found"):
        detect(project, from_file=Path("nope.txt"))


# --------------------------------------------------------------------------- setup.py, Pipfile, lock files


def test_setup_py_is_read_without_running_it(tmp_path):
    project = copy(tmp_path, "setup-py")
    plan, doc = init(project)
    found = plan.detected
    assert found.requirements == ["einops>=0.8.0", "torch>=2.4"] and found.python == ">=3.10"
    assert found.origins["torch>=2.4"] == "setup.py:7"
    assert doc["requirements"] == ["einops>=0.8.0", "torch>=2.4"] and doc["python"] == ">=3.10"
    assert any("extras_require (examples)" in n for n in found.notes)
    locked(project)


def test_setup_py_that_computes_its_requirements_reads_the_file_it_names(tmp_path):
    # the shape of openai/CLIP's setup.py: install_requires parsed from requirements.txt at run time
    (tmp_path / "setup.py").write_text(
        "import os\nimport pkg_resources\nfrom setuptools import setup\n"
        "setup(name='clip', install_requires=[str(r) for r in pkg_resources.parse_requirements(\n"
        "    open(os.path.join(os.path.dirname(__file__), 'requirements.txt')))])\n")
    (tmp_path / "requirements.txt").write_text("ftfy\nregex\ntorch\n")
    found = detect(tmp_path)
    assert found.requirements == ["ftfy", "regex", "torch"] and found.references == ["requirements.txt"]
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(install_requires=get())\n")
    (tmp_path / "requirements.txt").unlink()
    found = detect(tmp_path)
    assert any("install_requires is computed" in n and "setup.py is never run" in n for n in found.notes)


def test_poetry_lock_pins_win_over_ranges(tmp_path):
    project = copy(tmp_path, "poetry-lock")
    plan, doc = init(project)
    found = plan.detected
    assert found.requirements == ["torch==2.5.1+cu124", "numpy<2.0,>=1.26"]
    assert found.origins["torch==2.5.1+cu124"].startswith("poetry.lock (lock file; asked 'torch<3.0,>=2.4'")
    assert found.cuda == "12.4" and found.python == ">=3.11,<4.0"
    assert any("--extra tracking" in n for n in found.notes)
    _, lock = locked(project)
    assert lock.stack.frameworks[0].version == "2.5.1" and lock.stack.cuda == "12.4"
    # --extra: Poetry's extras table includes the optional dependency
    assert "wandb<0.18,>=0.17" in detect(project, extras=("tracking",)).requirements


def test_uv_project_with_git_source_and_lock(tmp_path):
    project = copy(tmp_path, "uv-sources")
    plan, doc = init(project)
    found = plan.detected
    assert found.requirements[:2] == ["torch==2.5.1+cu124", "torchvision==0.20.1+cu124"]
    assert "diffusers @ git+https://github.com/huggingface/diffusers@v0.31.0" in found.requirements
    assert found.extra_index_urls == ["https://download.pytorch.org/whl/cu124"]
    _, lock = locked(project)
    assert "diffusers @ git+https://github.com/huggingface/diffusers@v0.31.0" in lock.project.requirements
    with pytest.raises(InputError, match=r"no optional-dependency group 'gpu' \(it has: train\)"):
        detect(project, extras=("gpu",))
    found = detect(project, extras=("train",))
    assert "accelerate>=0.30" in found.requirements and found.references == ["pyproject.toml[train]"]


def test_pyproject_is_referenced_and_lock_check_names_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n'
                                             'dependencies = ["torch==2.5.*", "numpy"]\n')
    plan, doc = init(tmp_path)
    assert doc["requirements_file"] == "pyproject.toml" and "requirements" not in doc
    assert is_stale(tmp_path)[0] is False
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n'
                                             'dependencies = ["torch==2.5.*", "numpy", "einops"]\n')
    stale, why = is_stale(tmp_path)
    assert stale and why == "pyproject.toml changed since cudabox.lock was written"
    assert "einops" in load_spec(tmp_path).requirements


def test_pdm_project_and_lock(tmp_path):
    project = copy(tmp_path, "pdm-lock")
    plan, _ = init(project)
    assert plan.detected.requirements == ["tensorflow[and-cuda]==2.17.0", "pandas"]
    assert plan.detected.extra_index_urls == ["https://pypi.nvidia.com"]
    _, lock = locked(project)
    assert lock.stack.frameworks[0].name == "tensorflow" and lock.stack.frameworks[0].version == "2.17.0"


def test_pipfile_and_its_lock(tmp_path):
    project = copy(tmp_path, "pipfile")
    plan, doc = init(project)
    found = plan.detected
    assert found.requirements == ["torch==2.3.1+cu121", "fastapi", "uvicorn[standard]>=0.30",
                                  "clip @ git+https://github.com/openai/CLIP.git@main"]
    assert found.python == "3.11" and found.cuda == "12.1"
    assert any("[dev-packages] not included" in n for n in found.notes)
    assert doc["requirements"][2] == "uvicorn[standard]>=0.30"  # extras survive into cudabox.yaml
    _, lock = locked(project)
    assert lock.stack.python == "3.11" and "clip @ git+https://github.com/openai/CLIP.git@main" in \
        lock.project.requirements


# --------------------------------------------------------------------------- conda, cog, Dockerfile


def test_conda_environment_out_of_the_matrix_still_leaves_a_cudabox_yaml(tmp_path):
    project = copy(tmp_path, "stable-diffusion-conda")
    proc = run_cli("init", "--yes", "--no-host", project, check=3)
    assert "torch==1.11.0" in proc.stderr and "not locked" in proc.stdout
    text = (project / "cudabox.yaml").read_text()
    assert text.startswith("# NOT LOCKED YET") and "# exit 3: no stack satisfies the request:" in text
    assert "torch==1.11.0" in text.split("\n\n")[0]  # the reason, at the top
    assert not (project / "cudabox.lock").exists()
    doc = yaml.safe_load(text)
    assert "clip @ git+https://github.com/openai/CLIP.git@main" in doc["requirements"]
    assert "taming-transformers @ git+https://github.com/CompVis/taming-transformers.git@master" in \
        doc["requirements"]
    assert doc["cuda"] == "11.3" and doc["python"] == ">=3.9"
    # the way out: edit the written file, then lock
    text = text.replace('"torch==1.11.0"', '"torch==1.12.1"').replace('"torchvision==0.12.0"',
                                                                       '"torchvision==0.13.1"')
    (project / "cudabox.yaml").write_text(text)
    run_cli("lock", "--no-host", "--no-packages", cwd=project, check=0)  # download.pytorch.org: unreachable here
    assert read_lock(project).stack.frameworks[0].version == "1.12.1"


def test_cog_yaml_becomes_an_equivalent_cudabox_yaml(tmp_path):
    project = copy(tmp_path, "cog")
    plan, doc = init(project)
    found = plan.detected
    assert found.python == "3.10"  # unquoted `python_version: 3.10` is 3.10, not 3.1
    assert doc["python"] == "3.10" and doc["cuda"] == "12.1"
    assert doc["system_packages"] == ["libgl1", "ffmpeg", "git"]
    assert doc["run"] == ["echo environment ready", "pip install flash-attn --no-build-isolation"]
    assert "CLIP @ git+https://github.com/openai/CLIP.git" in doc["requirements"]
    assert any("predict: no counterpart" in n for n in found.notes)
    spec, lock = locked(project)
    assert lock.stack.python == "3.10" and lock.project.system_packages == ("libgl1", "ffmpeg", "git")


def test_dockerfile_from_pytorch_gives_torch_cuda_and_cudnn(tmp_path):
    project = copy(tmp_path, "dockerfile-pytorch")
    plan, doc = init(project)
    found = plan.detected
    assert "torch==2.4.1" in found.requirements and found.cuda == "12.4" and found.cudnn == "9"
    assert doc["cudnn"] == "9" and doc["cuda"] == "12.4"
    assert any("only its FROM line was read" in n for n in found.notes)
    _, lock = locked(project)
    assert lock.stack.frameworks[0].version == "2.4.1" and lock.stack.cuda == "12.4"


def test_dockerfile_from_nvidia_cuda_and_unrelated_base(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\n")
    found = detect(tmp_path)
    assert found.cuda == "12.4" and found.requirements == []
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim\n")
    assert detect(tmp_path).unused == ["Dockerfile: FROM python:3.11-slim names no CUDA version"]


# --------------------------------------------------------------------------- never empty-handed


def test_no_dependency_files_leaves_the_template(tmp_path):
    project = copy(tmp_path, "empty")
    proc = run_cli("init", "--yes", "--no-host", project, check=2)
    assert "nothing to resolve" in proc.stderr
    text = (project / "cudabox.yaml").read_text()
    assert "No dependency file was found" in text and "--with torch" in text
    assert yaml.safe_load(text)["requirements"] == []


def test_with_adds_to_an_empty_project(tmp_path):
    project = copy(tmp_path, "empty")
    out = json.loads(run_cli("init", "--json", "--no-host", "--no-packages", "--with", "torch==2.5.1", project, check=0).stdout)
    assert out["detected"]["requirements"] == ["torch==2.5.1"] and out["error"] is None
    assert yaml.safe_load((project / "cudabox.yaml").read_text())["requirements"] == ["torch==2.5.1"]


def test_typo_is_a_did_you_mean_and_a_file_to_edit(tmp_path):
    project = copy(tmp_path, "typo")
    proc = run_cli("init", "--yes", "--no-host", project, check=2)
    assert "requirements.txt:2: 'pytorch' is not the PyPI name; did you mean 'torch'?" in proc.stderr
    text = (project / "cudabox.yaml").read_text()
    assert "did you mean 'torch'" in text.split("\n\n")[0]
    assert yaml.safe_load(text)["requirements"] == ["numpy"]  # the rest of what was read is filled in
    out = json.loads(run_cli("init", "--json", "--force", "--no-host", "--no-packages", project).stdout)
    assert "did you mean 'torch'" in out["error"] and out["written"]


@pytest.mark.parametrize("name, meant", [("troch", "torch"), ("pytorch", "torch"), ("torchvison", "torchvision")])
def test_framework_typos_in_cudabox_yaml(tmp_path, name, meant):
    (tmp_path / "cudabox.yaml").write_text(f"requirements:\n  - {name}\n")
    with pytest.raises(InputError, match=f"did you mean '{meant}'"):
        load_spec(tmp_path)


def test_cog_key_names_get_a_did_you_mean(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('python_version: "3.11"\n')
    with pytest.raises(InputError, match=r"cudabox.yaml:1: unknown key 'python_version'; did you mean 'python'"):
        load_spec(tmp_path)


def test_unquoted_yaml_numbers_mean_what_was_written(tmp_path):
    (tmp_path / "cudabox.yaml").write_text("python: 3.10\ncuda: 12.10\nrequirements: [torch]\n")
    spec = load_spec(tmp_path)
    assert spec.python == "==3.10.*" and spec.cuda == "==12.10.*"


def test_url_requirements_are_checked(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('requirements: ["x @ git+ssh://git@github.com/o/x.git"]\n')
    with pytest.raises(InputError, match="only http"):
        load_spec(tmp_path)
    (tmp_path / "cudabox.yaml").write_text('requirements: ["x @ https://user:pw@example.org/x.whl"]\n')
    with pytest.raises(InputError, match="credentials"):
        load_spec(tmp_path)


def test_git_requirements_bring_git_into_the_image(tmp_path):
    from dataclasses import replace

    from cudabox.image.render import render

    def project_apt(lock) -> str:  # the project stage's apt step: after `USER 0:0`, before the requirements
        text = render(lock).dockerfile
        return text[text.rindex("USER 0:0"):text.index("COPY .cudabox/build/requirements.txt")]

    from cudabox.resolve.stack import Pin

    project = copy(tmp_path, "pipfile")
    init(project)
    lock = read_lock(project)  # locked --no-packages (no framework index here): stand-in pins to render it
    pin = Pin("fastapi", "0.1", "https://pypi.org/simple", (("https://x.example/fastapi-0.1-py3-none-any.whl", "a" * 64),))
    lock = replace(lock, stack=replace(lock.stack, pins=()), project=replace(lock.project, pins=(pin,)))
    assert project_apt(lock).rstrip().endswith("install -y --no-install-recommends \\\n        git")
    plain = replace(lock, project=replace(lock.project, requirements=("fastapi",)))
    assert "apt-get" not in render(plain).dockerfile.split("USER 0:0")[-1]


def test_with_hint_only_from_commands_that_have_it(tmp_path):
    assert "--with" not in run_cli("lock", "--no-host", cwd=tmp_path, check=2).stderr
    assert "--with REQ" in run_cli("resolve", "--no-host", cwd=tmp_path, check=2).stderr


def test_default_python_is_the_base_images_own(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==2.9.0\n")
    plan, _ = init(tmp_path)  # torch 2.9 supports 3.10-3.14; the newest OS Python among the bases is chosen
    stack = plan.resolution.stack
    assert stack.python_install == "os" and stack.python == "3.12" and stack.base_image == "ubuntu:24.04"
    assert any(w.startswith("Python 3.12: the base image's own Python, supported by torch 2.9") for w in stack.why)
    plan = plan_init(tmp_path, detect(tmp_path), python="3.13", no_host=True, force=True, packages=False)  # python: still wins
    assert (plan.resolution.stack.python, plan.resolution.stack.python_install) == ("3.13", "uv")


def test_gpu_variant_beside_requirements_txt_and_a_lock_that_pins_nothing(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "requirements-gpu.txt").write_text("numpy\ntorch==2.5.1\n")
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "numpy"\nversion = "2.1.0"\n')
    found = detect(tmp_path)
    assert found.requirements == ["numpy", "torch==2.5.1"] and found.references == ["requirements-gpu.txt"]
    assert "requirements.txt: another variant (requirements-gpu.txt was read; `--from requirements.txt` " \
           "reads this one)" in found.unused
    assert "uv.lock" not in found.sources and any(u.startswith("uv.lock: pins no framework") for u in found.unused)


def test_cog_patch_python_version_is_its_minor(tmp_path):
    (tmp_path / "cog.yaml").write_text('build:\n  python_version: "3.8.12"\n  python_packages: ["torch==1.13.1"]\n')
    assert detect(tmp_path).python == "3.8"


def test_dockerfile_base_from_an_arg_and_other_dockerfiles_named(tmp_path):
    # facebookresearch/sam2's shape: `ARG BASE_IMAGE=pytorch/pytorch:...` then `FROM ${BASE_IMAGE}`, in
    # backend.Dockerfile beside setup.py
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(install_requires=['torch>=2.5.1'])\n")
    (tmp_path / "backend.Dockerfile").write_text("ARG BASE_IMAGE=pytorch/pytorch:2.5.1-cuda12.1-cudnn9-runtime\n"
                                                 "ARG MODEL_SIZE=base_plus\n\nFROM ${BASE_IMAGE}\n")
    found = detect(tmp_path)
    assert found.cuda is None and found.unused == [
        "backend.Dockerfile: a Dockerfile for one part of the project; `--from backend.Dockerfile` reads its FROM"]
    found = detect(tmp_path, from_file=tmp_path / "backend.Dockerfile")
    assert found.requirements == ["torch==2.5.1"] and found.cuda == "12.1" and found.cudnn == "9"
    assert found.origins["torch==2.5.1"].startswith("backend.Dockerfile:4 (FROM pytorch/pytorch:2.5.1-cuda12.1")


def test_extra_groups_that_include_other_groups(tmp_path):
    # huggingface/lerobot's shape: `training = ["lerobot[dataset]", "wandb"]`
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "LeRobot"\nversion = "0"\ndependencies = ["torch>=2.7"]\n'
        '[project.optional-dependencies]\ndataset = ["datasets>=4"]\n'
        'training = ["lerobot[dataset]", "wandb"]\nviz = ["rerun-sdk"]\n')
    found = detect(tmp_path, extras=("training",))
    assert found.requirements == ["torch>=2.7", "wandb", "datasets>=4"]
    assert found.references == ["pyproject.toml[training]"]
    assert any("optional dependencies (viz) not included" in n for n in found.notes)
