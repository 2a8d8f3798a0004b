"""Property test: generated cudabox.yaml, requirements and lock files never crash `lock`, `resolve`, `dockerfile`.

Whatever a hostile or careless checkout holds (wrong types at every key, bad bytes, odd paths, links to
devices, credentials), the answer is exit 0, 2 (bad input, one line) or 3 (unsatisfiable): never exit 70,
never a traceback, never a credential echoed. The commands run in-process as entry.py runs them (cli.plain,
else the CLI's `main`).
Examples are derandomized so a failure reproduces in CI, printed as generated (no shrinking: see SETTINGS).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cudabox.cli import main, plain
from cudabox.project.spec import KEYS

SECRETS = ("hunter2", "s3cr3t-token")  # must never appear in any output
ODD_STRINGS = [
    "", " ", "\n", "\t", "\x00", "\x1b[31m", "==", "*", "-", ".", "..", "/", "~", "12.8", "12", "9", "3.11",
    ">=3.10", "torch", "torch==2.7.*", "jax[cuda12]", "tensorflow[and-cuda]", "numpy>=1.26", "torch==9.9",
    "A100", "V100", "sm_89", "8.9", "535.104.05", "1.2.3.4.5", "slim", "devel", "runtime", "auto", "uv", "os",
    "git", "git\n", "libfoo=1.0", "/workspace", "/workspace\n", "/usr", "/cache/pip", "/", "/opt/venv/x",
    "r.txt", "sub/r2.txt", "../outside.txt", "/etc/passwd", "/dev/zero", "link-zero", "loop", "sub", "ca.pem",
    "link-out", "~/.ssh/id_rsa", "https://pypi.org/simple", "https://user:hunter2@example.com/simple",
    "https://example.com/simple?token=s3cr3t-token", "ftp://x", "PATH", "A" * 300, "é", "\u202e", "\udcff",
    "true", "null", "{}", "[]", "'", '"', "\\", "$(id)", "`id`", "; rm -rf /",
]
text = st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=20))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), text)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(text, inner, max_size=4)), max_leaves=8)
BASES = [{"cuda": "12.8"}, {"requirements": ["torch"]}, {"requirements": ["jax"], "gpus": ["A100"]}, {}]
REQ_LINES = [
    "numpy", "torch", "torch==2.7.*", "jax[cuda12]", "-r sub/r2.txt", "-r r.txt", "-r ../outside.txt",
    "-r /etc/passwd", "-r link-zero", "-r loop", "-r sub", "-r", "-c c.txt", "--constraint c.txt", "-e .",
    "--index-url https://user:hunter2@example.com/simple", "--extra-index-url https://x.org/s?token=s3cr3t-token",
    "-i https://pypi.org/simple", "foo @ https://user:hunter2@example.com/foo.whl", "bar @@ https://u:hunter2@x.org/y", "# comment",
    "numpy # trailing", "  ", "\x00", "é", "numpy; python_version < '3'", "numpy[", "===",
]
req_files = st.lists(st.one_of(st.sampled_from(REQ_LINES), st.text(max_size=30)), max_size=6)
raw_bytes = st.binary(max_size=40)


def _layout(root: Path) -> Path:
    """A project folder with the odd neighbours the generated paths point at."""
    project = root / "proj"
    (project / "sub").mkdir(parents=True)
    (root / "outside.txt").write_text("numpy\n")
    (project / "sub" / "r2.txt").write_text("numpy\n-r ../r.txt\n")
    (project / "ca.pem").write_text("not really a certificate\n")
    (project / "link-zero").symlink_to("/dev/zero")
    (project / "link-out").symlink_to(root / "outside.txt")
    (project / "loop").symlink_to(project / "loop")
    with contextlib.suppress(OSError):  # a non-UTF-8 file name in the project
        (project / os.fsdecode(b"bad-\xff-name.txt")).write_text("x")
    return project


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = plain([str(a) for a in args])  # entry.py's way: a plain `resolve` without typer, else typer's main
        if rc is None:
            rc = main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


def _assert_clean(args, rc, out, err):
    shown = f"cudabox {' '.join(map(str, args))} -> {rc}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    assert rc in (0, 2, 3), shown
    assert "Traceback" not in out + err and "internal error" not in err, shown
    for secret in SECRETS:
        assert secret not in out + err, shown
    if rc == 2 and "--json" in args:
        assert set(json.loads(out)) == {"error", "exit_code"} and "\n" not in json.loads(out)["error"], shown
    elif rc == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("cudabox: error: "), shown


def _write_spec(project: Path, doc, mutation: bytes | None, cut: int) -> None:
    body = yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogateescape") if doc is not None else b""
    if mutation is not None:  # bad bytes spliced in somewhere
        at = cut % (len(body) + 1)
        body = body[:at] + mutation + body[at:]
    (project / "cudabox.yaml").write_bytes(body)


def _commands(project: Path):
    # --no-packages: the property is about input handling, offline (full locking needs the framework indexes)
    for args in (("resolve", "-C", project, "--json"), ("lock", "--no-packages", "-C", project),
                 ("dockerfile", "-C", project)):
        rc, out, err = _cli(*args)
        _assert_clean(args, rc, out, err)


# No shrink phase: each example runs three commands, and shrinking one can take many minutes; the failing
# example is printed as generated.
SETTINGS = dict(deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=600, **SETTINGS)
@given(base=st.sampled_from(BASES), keys=st.lists(st.sampled_from(KEYS + ("flavor", "", "1")), max_size=3),
       data=st.data(), mutation=st.one_of(st.none(), raw_bytes), cut=st.integers(0, 400),
       requirements=req_files, top=st.one_of(st.none(), st.just("top")))
def test_generated_cudabox_yaml(base, keys, data, mutation, cut, requirements, top):
    doc = dict(base)
    for key in keys:
        doc[key] = data.draw(values, label=key)
    if top:  # not a mapping at all
        doc = data.draw(values, label="document")
    with tempfile.TemporaryDirectory() as tmp:
        project = _layout(Path(tmp))
        (project / "r.txt").write_bytes("\n".join(requirements).encode("utf-8", "surrogateescape"))
        _write_spec(project, doc, mutation, cut)
        _commands(project)


@settings(max_examples=250, **SETTINGS)
@given(lines=req_files, extra=st.lists(st.one_of(st.sampled_from(REQ_LINES), st.text(max_size=30)), max_size=4),
       mutation=st.one_of(st.none(), raw_bytes), cut=st.integers(0, 400))
def test_generated_requirements_files(lines, extra, mutation, cut):
    with tempfile.TemporaryDirectory() as tmp:
        project = _layout(Path(tmp))
        body = "\n".join(["torch"] + lines).encode("utf-8", "surrogateescape")
        if mutation is not None:
            at = cut % (len(body) + 1)
            body = body[:at] + mutation + body[at:]
        (project / "r.txt").write_bytes(body)
        (project / "sub" / "r2.txt").write_bytes("\n".join(extra).encode("utf-8", "surrogateescape"))
        (project / "cudabox.yaml").write_text("requirements_file: r.txt\n")
        _commands(project)


@pytest.fixture(scope="module")
def valid_lock() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "cudabox.yaml").write_text(
            "name: p\nrequirements: [torch, numpy]\ngpus: [A100]\ndriver: '570.86.15'\nsystem_packages: [git]\n"
            "env: {A: b}\nrun: ['echo hi']\n")
        rc, out, err = _cli("lock", "--no-packages", "-C", project)  # offline: no framework index here
        assert rc == 0, err
        return json.loads((project / "cudabox.lock").read_text())


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _paths(value, prefix + (i,))


def _rehash(data: dict) -> None:
    """Recompute lock_hash the way cudabox does, as a hand-editor who knows the format would."""
    from cudabox.lock.lockfile import Lock, ProjectInputs
    from cudabox.resolve.stack import Stack

    with contextlib.suppress(Exception):
        data["lock_hash"] = Lock(project=ProjectInputs.from_dict(data["project"]),
                                 stack=Stack.from_dict(data["stack"]), inputs_hash="").hash


@settings(max_examples=250, **SETTINGS)
@given(data=st.data(), rehash=st.booleans(), mutation=st.one_of(st.none(), raw_bytes), cut=st.integers(0, 4000))
def test_generated_lock_files(valid_lock, data, rehash, mutation, cut):
    lock = json.loads(json.dumps(valid_lock))
    paths = [p for p in _paths(lock) if p]
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        where = data.draw(st.sampled_from(paths), label="path")
        parent = lock
        with contextlib.suppress(KeyError, IndexError, TypeError):
            for step in where[:-1]:
                parent = parent[step]
            parent[where[-1]] = data.draw(values, label="value")
    if rehash and isinstance(lock, dict):
        _rehash(lock)
    body = json.dumps(lock, indent=2).encode()
    if mutation is not None:
        at = cut % (len(body) + 1)
        body = body[:at] + mutation + body[at:]
    with tempfile.TemporaryDirectory() as tmp:
        project = _layout(Path(tmp))
        (project / "cudabox.yaml").write_text("cuda: '12.8'\n")
        (project / "cudabox.lock").write_bytes(body)
        for args in (("dockerfile", "-C", project), ("lock", "--check", "-C", project)):
            rc, out, err = _cli(*args)
            if args[1] == "--check" and rc == 1:  # a stale lock is a failed check: exit 1 by design
                rc = 0
            _assert_clean(args, rc, out, err)


# --------------------------------------------------------------------------- `cudabox init` on hostile files
# init reads whatever a checkout holds. Every read is bounded (files.read_input): a name that is no regular
# file (a device, a pipe, a directory, a link to nothing or a loop) is named as not used, with why, and init
# goes on; a regular file it can't use (too big, not UTF-8) is exit 2 with one line naming it (and the line),
# cudabox.yaml still written. Never an OOM, a hang or a traceback: each run is capped at 1 GiB and 60 s.


def _init(project: Path, *args) -> "subprocess.CompletedProcess":
    import resource
    import subprocess
    import sys

    from tests.support import CUDABOX

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    env = dict(os.environ, CUDABOX_NO_HOST="1")
    return subprocess.run([sys.executable, str(CUDABOX), "init", "--yes", "--no-packages", *map(str, args),
                           str(project)], capture_output=True, text=True, timeout=60, env=env, preexec_fn=cap)


def _make(project: Path, name: str, kind: str) -> None:
    path = project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(project / "gone")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "huge":  # sparse: no disk used
        with open(path, "wb") as fh:
            fh.truncate((33 if name.endswith(".lock") else 9) << 20)
    elif kind == "not-utf8":
        path.write_bytes(b"numpy\n\xff\xfe\n")
    else:
        raise AssertionError(kind)


NOT_FILES = {"zero-link": "not a regular file", "fifo": "not a regular file", "directory": "a directory",
             "dangling": "a symlink that leads nowhere", "loop": "a symlink that leads nowhere"}


@pytest.mark.parametrize("name", ["requirements.txt", "requirements/gpu.txt", "pyproject.toml", "setup.py",
                                  "Pipfile", "environment.yml", "cog.yaml", "Dockerfile", "uv.lock",
                                  ".python-version"])
@pytest.mark.parametrize("kind", list(NOT_FILES))
def test_init_names_what_is_no_file_and_goes_on(tmp_path, name, kind):
    project = tmp_path / "proj"
    project.mkdir()
    _make(project, name, kind)
    proc = _init(project, "--cuda", "12.8")
    assert proc.returncode == 0, proc.stderr
    assert f"not used: {name}: {NOT_FILES[kind]}" in proc.stdout, proc.stdout
    spec = (project / "cudabox.yaml").read_text()
    assert f"# Not used: {name}: {NOT_FILES[kind]}" in spec and (project / "cudabox.lock").is_file()


@pytest.mark.parametrize("name, kind, says", [
    ("requirements.txt", "huge", "requirements.txt: larger than 8 MiB"),
    ("requirements.txt", "not-utf8", "requirements.txt:2: not valid UTF-8 (byte 0xff)"),
    ("requirements-gpu.txt", "not-utf8", "requirements-gpu.txt:2: not valid UTF-8"),
    ("pyproject.toml", "huge", "pyproject.toml: larger than 8 MiB"),
    ("setup.py", "not-utf8", "setup.py:2: not valid UTF-8"),
    ("environment.yml", "huge", "environment.yml: larger than 8 MiB"),
    ("uv.lock", "huge", "uv.lock: larger than 32 MiB"),
    (".python-version", "not-utf8", ".python-version:2: not valid UTF-8"),
])
def test_init_refuses_a_file_it_cannot_use_in_one_line(tmp_path, name, kind, says):
    project = tmp_path / "proj"
    project.mkdir()
    _make(project, name, kind)
    proc = _init(project, "--cuda", "12.8")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cudabox: error: {says}"), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "NOT LOCKED" in (project / "cudabox.yaml").read_text()  # never empty-handed


def test_init_reads_past_odd_neighbours(tmp_path):
    """A huge or device-linked Python file is not a dependency file: the KERAS_BACKEND scan skips it; a
    -r include or --from that is no regular file is exit 2 naming it; a non-UTF-8 file name is printed."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "requirements.txt").write_text("torch\n")
    _make(project, "big.py", "huge")
    _make(project, "zero.py", "zero-link")
    proc = _init(project)
    assert proc.returncode == 0, proc.stderr
    (project / "requirements.txt").write_text("torch\n-r zero.txt\n")
    _make(project, "zero.txt", "zero-link")
    proc = _init(project, "--force")
    assert proc.returncode == 2 and "requirements.txt:2: -r zero.txt: not a regular file" in proc.stderr, proc.stderr
    proc = _init(project, "--force", "--from", project / "zero.txt")
    assert proc.returncode == 2 and "not a regular file" in proc.stderr and "file not found" not in proc.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "requirements.txt").write_text("torch\n")
    (other / os.fsdecode(b"requirements-\xff.txt")).write_text("jax\n")
    proc = _init(other)
    assert proc.returncode == 0, proc.stderr
    assert "requirements-\\xff.txt: another variant" in proc.stdout
    assert "requirements-\\xff.txt" in (other / "cudabox.yaml").read_text()
