"""Property test: generated cudabox.yaml, requirements and lock files never crash `lock`, `resolve`, `dockerfile`.

Whatever a hostile or careless checkout holds (wrong types at every key, bad bytes, odd paths, links to
devices, credentials), the answer is exit 0, 2 (bad input, one line) or 3 (unsatisfiable): never exit 70,
never a traceback, never a credential echoed. The commands run in-process through the CLI's own `main`.
Examples are derandomized so a failure reproduces in CI; hypothesis shrinks it to the smallest input.
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

from cudabox.cli import main
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
