"""Project detection (cudabox/detect.py) and init's cudabox.yaml writer: pure, no engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudabox.project.detect import conda_requirement
from cudabox.project.survey import detect
from cudabox.project.pyproject import poetry_constraint
from cudabox.errors import InputError
from tests.support import REPO

PROJECTS = REPO / "tests" / "fixtures" / "projects"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# --------------------------------------------------------------------------- requirements.txt


def test_requirements_with_include_index_and_local_version(tmp_path):
    write(tmp_path, {"requirements.txt": "--extra-index-url https://download.pytorch.org/whl/cu121\n"
                                         "-r base.txt\ntorch==2.1.0+cu121  # pinned\n",
                     "base.txt": "numpy<2\n"})
    found = detect(tmp_path)
    assert found.requirements == ["numpy<2", "torch==2.1.0+cu121"]
    assert found.origins["numpy<2"] == "base.txt:1"
    assert found.origins["torch==2.1.0+cu121"] == "requirements.txt:3"
    assert found.extra_index_urls == ["https://download.pytorch.org/whl/cu121"]
    assert found.cuda == "12.1" and found.cuda_from.startswith("requirements.txt:1")
    assert any("CUDA 12.1 build" in n for n in found.notes)  # the local version, explained
    assert found.references == ["requirements.txt"]  # spec.py reads it the same way: referenced
    assert found.frameworks == {"torch": "torch==2.1.0+cu121"}


@pytest.mark.parametrize("url, cuda", [("https://download.pytorch.org/whl/cu118", "11.8"),
                                       ("https://download.pytorch.org/whl/nightly/cu128/", "12.8"),
                                       ("https://download.pytorch.org/whl/cu130", "13.0"),
                                       ("https://pypi.example.com/simple", None)])
def test_index_url_variant_hint(tmp_path, url, cuda):
    write(tmp_path, {"requirements.txt": f"--index-url {url}\ntorch\n"})
    assert detect(tmp_path).cuda == cuda


def test_requirements_that_spec_cannot_reference_are_inlined_with_notes(tmp_path):
    write(tmp_path, {"requirements.txt": "-e .\ntensorflow-gpu==2.15.*\nfoo @ https://x.org/foo.whl\n"
                                         "bar==1.0 --hash=sha256:abc\n"})
    found = detect(tmp_path)
    # a URL requirement is kept and installed as written (issue #12); the rename and -e . are notes
    assert found.requirements == ["tensorflow==2.15.*", "foo @ https://x.org/foo.whl", "bar==1.0"]
    assert found.references == []
    notes = "\n".join(found.notes)
    assert "editable install" in notes and "pip install -e ." in notes
    assert "tensorflow-gpu is tensorflow" in notes


def test_continued_lines_keep_their_line_numbers(tmp_path):
    write(tmp_path, {"requirements.txt": "numpy \\\n  >=1.26\nbad=>1\n"})
    with pytest.raises(InputError, match=r"requirements.txt:3: invalid requirement"):
        detect(tmp_path)
    write(tmp_path, {"requirements.txt": "numpy \\\n  >=1.26\npandas\n"})
    found = detect(tmp_path)
    assert found.origins == {"numpy>=1.26": "requirements.txt:1", "pandas": "requirements.txt:3"}


def test_requirements_errors_name_file_and_line(tmp_path):
    write(tmp_path, {"requirements.txt": "numpy\n\ntorch=>2\n"})
    with pytest.raises(InputError, match=r"requirements.txt:3: invalid requirement 'torch=>2'"):
        detect(tmp_path)
    write(tmp_path, {"requirements.txt": "-r missing.txt\n"})
    with pytest.raises(InputError, match=r"requirements.txt:1: -r missing.txt: file not found"):
        detect(tmp_path)


# --------------------------------------------------------------------------- pyproject.toml


def test_pep621(tmp_path):
    write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.10"\n'
                                       'dependencies = [\n  "tensorflow[and-cuda]>=2.15",\n  "pandas",\n]\n'
                                       '[project.optional-dependencies]\ndev = ["pytest"]\n'})
    found = detect(tmp_path)
    assert found.requirements == ["tensorflow[and-cuda]>=2.15", "pandas"]
    assert found.origins["pandas"] == "pyproject.toml:6"
    assert found.python == ">=3.10" and found.python_from.startswith("pyproject.toml:3")
    assert any("optional dependencies (dev)" in n for n in found.notes)


@pytest.mark.parametrize("poetry, pep440", [
    ("^2.1", ">=2.1,<3.0"), ("^1.2.3", ">=1.2.3,<2.0.0"), ("^0.2.3", ">=0.2.3,<0.3.0"), ("^0.0.3", ">=0.0.3,<0.0.4"),
    ("^0", ">=0,<1.0"), ("~1.2.3", ">=1.2.3,<1.3.0"), ("~1.2", ">=1.2,<1.3"), ("~1", ">=1,<2.0"),
    ("2.1.0", "==2.1.0"), ("2.1.*", "==2.1.*"), ("*", ""), (">=2,<3", ">=2,<3"), (">=2 <3", ">=2,<3"),
    ("~=2.1", "~=2.1"), ("^3.10", ">=3.10,<4.0")])
def test_poetry_constraints(poetry, pep440):
    assert poetry_constraint(poetry) == pep440


def test_poetry_project_with_source(tmp_path):
    write(tmp_path, {"pyproject.toml": """[tool.poetry]
name = "p"

[tool.poetry.dependencies]
python = "^3.11"
torch = {version = "^2.4", source = "pytorch"}
numpy = "~1.26"
mylib = {git = "https://github.com/x/mylib.git"}
extra-thing = {version = "*", optional = true}

[tool.poetry.group.dev.dependencies]
pytest = "^8"

[[tool.poetry.source]]
name = "pytorch"
url = "https://download.pytorch.org/whl/cu124"
priority = "explicit"
"""})
    found = detect(tmp_path)
    assert found.requirements == ["torch<3.0,>=2.4", "numpy<1.27,>=1.26",
                                  "mylib @ git+https://github.com/x/mylib.git"]
    assert found.python == ">=3.11,<4.0"
    assert found.extra_index_urls == ["https://download.pytorch.org/whl/cu124"] and found.cuda == "12.4"
    assert found.origins["torch<3.0,>=2.4"] == "pyproject.toml:6"
    notes = "\n".join(found.notes)
    assert "extra-thing is optional" in notes and "groups (dev)" in notes


def test_poetry_alternatives_are_an_error_with_line(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.11"\nnumpy = "^1.0 || ^2.0"\n'})
    with pytest.raises(InputError, match=r"pyproject.toml:3: numpy: .*alternatives"):
        detect(tmp_path)


def test_uv_sources_and_indexes(tmp_path):
    write(tmp_path, {"pyproject.toml": """[project]
name = "u"
dependencies = ["torch>=2.5", "torchvision"]

[tool.uv.sources]
torch = [{ index = "pytorch-cu126", marker = "sys_platform == 'linux'" }]
torchvision = { index = "pytorch-cu126" }

[[tool.uv.index]]
name = "pytorch-cu126"
url = "https://download.pytorch.org/whl/cu126"
explicit = true
"""})
    found = detect(tmp_path)
    assert found.requirements == ["torch>=2.5", "torchvision"]
    assert found.extra_index_urls == ["https://download.pytorch.org/whl/cu126"] and found.cuda == "12.6"


def test_bad_python_pin_names_its_file_and_line(tmp_path):
    write(tmp_path, {"pyproject.toml": '[project]\nrequires-python = "three"\n'})
    with pytest.raises(InputError, match=r"pyproject.toml:2 requires-python: 'three' is not a version"):
        detect(tmp_path)


def test_invalid_toml_names_the_line(tmp_path):
    write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["a",\n'})
    with pytest.raises(InputError, match=r"pyproject.toml:\d+: invalid TOML"):
        detect(tmp_path)


# --------------------------------------------------------------------------- environment.yml, setup.cfg


@pytest.mark.parametrize("spec, out", [
    ("numpy", ("numpy", "")), ("numpy=1.26", ("numpy", "==1.26.*")), ("numpy=1.26.4=py311h64a7726_0",
                                                                       ("numpy", "==1.26.4")),
    ("numpy==1.26.4", ("numpy", "==1.26.4")), ("numpy>=1.20,<2", ("numpy", ">=1.20,<2")),
    ("conda-forge::pytorch=2.1", ("pytorch", "==2.1.*")), ("numpy 1.26.*", ("numpy", "==1.26.*"))])
def test_conda_specs(spec, out):
    assert conda_requirement(spec) == out


def test_environment_yml(tmp_path):
    write(tmp_path, {"environment.yml": """name: env
channels: [pytorch, nvidia, conda-forge]
dependencies:
  - python=3.11
  - pytorch=2.1
  - pytorch-cuda=12.1
  - torchvision
  - cudnn
  - tensorflow-gpu
  - jaxlib
  - pip
  - pip:
      - --extra-index-url https://example.org/simple
      - transformers>=4.40
"""})
    found = detect(tmp_path)
    assert found.requirements == ["torch==2.1.*", "torchvision", "tensorflow", "jax", "transformers>=4.40"]
    assert found.python == "3.11" and found.cuda == "12.1" and found.cuda_from.startswith("environment.yml:6")
    assert found.origins["transformers>=4.40"] == "environment.yml:14"
    assert found.extra_index_urls == ["https://example.org/simple"]
    notes = "\n".join(found.notes)
    assert "conda's pytorch is torch" in notes and "cudnn comes with the stack" in notes and "channels" in notes


def test_conda_cuda_builds_cudnn_and_bare_git_pip_lines(tmp_path):
    write(tmp_path, {"environment.yml": """dependencies:
  - python=3.10
  - jaxlib=0.4.31=cuda120py310h1234567_200
  - cudnn=8.9
  - pip:
      - git+https://github.com/google/flax.git
      - -e git+https://github.com/org/tool.git@v2#egg=tool&subdirectory=python
""", "conda.yaml": "name: other\ndependencies: [scipy]\n"})
    found = detect(tmp_path)
    assert found.cuda == "12" and "CUDA 12 build" in found.cuda_from
    assert found.cudnn == "8" and found.python == "3.10"
    assert found.requirements == ["jax==0.4.31", "flax @ git+https://github.com/google/flax.git",
                                  "tool @ git+https://github.com/org/tool.git@v2#subdirectory=python"]
    assert found.unused == ["conda.yaml: environment.yml was read (one conda environment per project)"]


def test_environment_yml_errors(tmp_path):
    write(tmp_path, {"environment.yml": "dependencies:\n  - numpy\n  - {weird: 1}\n"})
    with pytest.raises(InputError, match=r"environment.yml:3: dependencies: expected a package spec"):
        detect(tmp_path)
    write(tmp_path, {"environment.yml": "dependencies:\n  - numpy=1.2|1.3\n"})
    with pytest.raises(InputError, match=r"environment.yml:2: .*no PEP 440 form"):
        detect(tmp_path)
    write(tmp_path, {"environment.yml": "dependencies: [a\n"})
    with pytest.raises(InputError, match=r"environment.yml:\d+: invalid YAML"):
        detect(tmp_path)


def test_setup_cfg(tmp_path):
    write(tmp_path, {"setup.cfg": "[metadata]\nname = s\n\n[options]\npython_requires = >=3.10\n"
                                  "install_requires =\n    jax[cuda12]>=0.4.30\n    optax\n"
                                  "[options.extras_require]\ntest = pytest\n"})
    found = detect(tmp_path)
    assert found.requirements == ["jax[cuda12]>=0.4.30", "optax"]
    assert found.origins["optax"] == "setup.cfg:8" and found.python == ">=3.10"
    assert any("extras_require (test)" in n for n in found.notes)
    write(tmp_path, {"setup.cfg": "[options]\ninstall_requires =\n    not a requirement!\n"})
    with pytest.raises(InputError, match=r"setup.cfg:3: invalid requirement"):
        detect(tmp_path)


def test_several_files_combine_and_python_version_file_wins(tmp_path):
    write(tmp_path, {"requirements.txt": "torch\n", "pyproject.toml": '[project]\nrequires-python = ">=3.9"\n'
                     'dependencies = ["numpy"]\n', ".python-version": "3.11.7\n"})
    found = detect(tmp_path)
    assert found.sources == ["requirements.txt", "pyproject.toml"]
    assert found.requirements == ["torch", "numpy"] and found.python == "3.11"


# --------------------------------------------------------------------------- init's plan (no engine)


@pytest.mark.parametrize("name, framework", [("torch-requirements", "torch"), ("tf-pyproject", "tensorflow"),
                                             ("jax-conda", "jax")])
def test_example_projects_plan(tmp_path, name, framework):
    import shutil

    from cudabox.lock.init import plan_init, write_plan
    from cudabox.lock.lockfile import read_lock
    from cudabox.project.spec import load_spec

    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    plan = plan_init(project, detect(project), no_host=True, packages=False)  # no PyTorch index reachable here
    assert list(plan.files) == ["cudabox.yaml", "cudabox.lock", ".dockerignore"]
    assert framework in plan.resolution.stack.framework_names
    write_plan(plan)
    spec, lock = load_spec(project), read_lock(project)
    assert spec.inputs_hash == lock.inputs_hash  # fresh: `cudabox run` will not re-lock
    assert lock.stack.python == "3.11"
    text = (project / "cudabox.yaml").read_text()
    assert "host was ignored (--no-host)" in text and "# flavour: auto" in text and "# workdir:" in text
    with pytest.raises(InputError, match="cudabox.yaml exists; pass --force"):
        plan_init(project, detect(project), no_host=True, packages=False)


def test_existing_dockerignore_is_kept_unless_forced(tmp_path):
    from cudabox.lock.init import plan_init

    write(tmp_path, {"requirements.txt": "torch\n", ".dockerignore": "data/\n"})
    plan = plan_init(tmp_path, detect(tmp_path), python="3.11", no_host=True, packages=False)
    assert plan.kept == [".dockerignore"] and ".dockerignore" not in plan.files
    plan = plan_init(tmp_path, detect(tmp_path), python="3.11", no_host=True, force=True, packages=False)
    assert ".dockerignore" in plan.files
