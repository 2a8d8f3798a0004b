"""cudabox.lock: the resolved stack plus the project's build inputs, hashed.

The lock is what every later step reads (render, build, run, export), so the
data flows one way: cudabox.yaml -> resolve -> cudabox.lock -> the rest.
`inputs_hash` is the hash of cudabox.yaml (and its requirements file): when it
no longer matches, the lock is stale.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import CheckFailed, CudaboxError, InputError
from ..files import display_path, read_input, read_input_text, write_atomic
from ..resolve.stack import Pin, Stack, digest

if TYPE_CHECKING:  # reading a lock needs no cudabox.yaml parser (nor the matrix it checks names against)
    from ..project.spec import ProjectSpec

LOCK_FILE = "cudabox.lock"
FORMAT = "cudabox.lock/v1"
SPEC_INPUT = "cudabox.yaml"  # project.spec.SPEC_FILE, the first of a lock's inputs (tests keep them equal)


@dataclass(frozen=True)
class ProjectInputs:
    """The project's own build inputs, on top of the stack."""

    name: str
    requirements: tuple[str, ...] = ()  # pip requirements beyond the stack's frameworks
    system_packages: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    run: tuple[str, ...] = ()
    workdir: str = "/workspace"
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    pins: tuple[Pin, ...] | None = None  # what the requirements add to the stack, locked (None: not locked)

    def to_dict(self) -> dict:
        return {"name": self.name, "requirements": list(self.requirements),
                "system_packages": list(self.system_packages), "env": dict(self.env), "run": list(self.run),
                "workdir": self.workdir, "index_url": self.index_url,
                "extra_index_urls": list(self.extra_index_urls),
                "pins": None if self.pins is None else [p.to_dict() for p in sorted(self.pins, key=lambda p: p.name)]}

    @classmethod
    def from_dict(cls, d: dict) -> "ProjectInputs":
        return cls(name=d["name"], requirements=tuple(d.get("requirements", ())),
                   system_packages=tuple(d.get("system_packages", ())),
                   env=tuple((k, v) for k, v in d.get("env", {}).items()), run=tuple(d.get("run", ())),
                   workdir=d.get("workdir", "/workspace"), index_url=d.get("index_url"),
                   extra_index_urls=tuple(d.get("extra_index_urls", ())),
                   pins=None if d.get("pins") is None else tuple(Pin.from_dict(p) for p in d["pins"]))


@dataclass(frozen=True)
class Lock:
    project: ProjectInputs
    stack: Stack
    inputs_hash: str
    generated_by: str = field(default=f"cudabox {__version__}")
    inputs: tuple[tuple[str, str], ...] = ()  # (file, sha256): cudabox.yaml and the files it references

    @property
    def stack_hash(self) -> str:
        return self.stack.hash

    @property
    def hash(self) -> str:
        """Content address of the project image: the stack plus the project's build inputs."""
        return digest({"stack": self.stack_hash, "project": self.project.to_dict()})

    def to_json(self) -> str:
        data = {
            "lockfile": FORMAT,
            "generated_by": self.generated_by,
            "inputs_hash": self.inputs_hash,
            **({"inputs": dict(self.inputs)} if self.inputs else {}),
            "stack_hash": self.stack_hash,
            "lock_hash": self.hash,
            "project": self.project.to_dict(),
            "stack": self.stack.to_dict(),
        }
        return dump_json(data)


def dump_json(data: dict) -> str:
    """Indented JSON, except that each locked package stays on one line (sorted by name): a pin change is
    a one-line diff."""
    lines = {}

    def mark(pins):
        out = []
        for pin in sorted(pins, key=lambda p: p["name"]):
            key = f"\x00pin{len(lines)}\x00"
            lines[json.dumps(key)] = json.dumps(pin, separators=(", ", ": "))
            out.append(key)
        return out

    for part, key in (("project", "pins"), ("stack", "pins"), ("stack", "tool_pins")):
        if data.get(part, {}).get(key) is not None:
            data[part] = dict(data[part], **{key: mark(data[part][key])})
    text = json.dumps(data, indent=2)
    for key, line in lines.items():
        text = text.replace(key, line)
    return text + "\n"


def make_lock(spec: ProjectSpec, stack: Stack, others: list[str], project_pins=None) -> Lock:
    """project_pins None: the packages were not locked (a stack-only lock; `cudabox build` refuses it)."""
    if stack.pins is None:
        project_pins = None
    elif project_pins is None:
        project_pins = ()
    project = ProjectInputs(
        name=spec.name, requirements=tuple(others), system_packages=spec.system_packages, env=spec.env,
        run=spec.run, workdir=spec.workdir, index_url=spec.index_url, extra_index_urls=spec.extra_index_urls,
        pins=None if project_pins is None else tuple(project_pins))
    return Lock(project=project, stack=stack, inputs_hash=spec.inputs_hash, inputs=spec.inputs)


def write_lock(lock: Lock, directory: Path) -> Path:
    path = Path(directory) / LOCK_FILE
    write_atomic(path, lock.to_json())
    from .known import remember_project

    remember_project(Path(directory))  # `cudabox images` says which projects use an image; prune keeps them
    return path


def read_lock(directory: Path = Path(".")) -> Lock:
    path = Path(directory) / LOCK_FILE
    shown = display_path(path)
    if not os.path.lexists(path):
        raise InputError(f"{shown}: not found; run `cudabox lock` (or `cudabox init`) first")
    text = read_input_text(path, shown=shown)
    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply; regenerate it with `cudabox lock`") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{shown}:{exc.lineno}: not valid JSON ({exc.msg}); regenerate it with `cudabox lock`") \
            from None
    if not isinstance(data, dict) or data.get("lockfile") != FORMAT:
        raise InputError(f"{shown}: not a {FORMAT} file; regenerate it with `cudabox lock`")
    wrong = _wrong_shape(data)
    if wrong:
        raise InputError(f"{shown}: malformed lock ({wrong}); regenerate it with `cudabox lock`")
    try:
        lock = Lock(project=ProjectInputs.from_dict(data["project"]), stack=Stack.from_dict(data["stack"]),
                    inputs_hash=data["inputs_hash"], generated_by=data.get("generated_by", "?"),
                    inputs=tuple((data.get("inputs") or {}).items()))
        lock_hash = lock.hash
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{shown}: malformed lock ({type(exc).__name__}: {exc}); "
                         "regenerate it with `cudabox lock`") from None
    if data.get("lock_hash") != lock_hash:
        raise InputError(f"{shown}: its content does not match its lock_hash (edited by hand?); "
                         "regenerate it with `cudabox lock`")
    return lock


# What every later step assumes of a lock's values (a hand-edited lock with a valid lock_hash must be an
# exit 2 here, not a crash in render or run): field -> type; (type, None) may be null; [type] a list of it.
_TEXT, _OPT = str, (str, type(None))
_SHAPE = {
    "inputs_hash": _TEXT,
    "project": {"name": _TEXT, "requirements": [_TEXT], "system_packages": [_TEXT], "env": {_TEXT: _TEXT},
                "run": [_TEXT], "workdir": _TEXT, "index_url": _OPT, "extra_index_urls": [_TEXT]},
    "stack": {"python": _TEXT, "python_install": _TEXT, "cuda": _TEXT, "cudnn": _OPT, "flavour": _TEXT,
              "base_image": _TEXT, "os": _TEXT, "packages": {_TEXT: _TEXT}, "requirements": [_TEXT],
              "index_urls": [_TEXT], "requirement": _TEXT, "min_driver": _OPT, "driver_mode": _TEXT,
              "targets": [dict], "frameworks": [dict], "why": [_TEXT], "warnings": [_TEXT]},
}


def _wrong_shape(value, shape=_SHAPE, where: str = "") -> str | None:
    """Where `value` departs from `shape` (missing optional keys are fine), or None."""
    if isinstance(shape, dict) and len(shape) == 1 and next(iter(shape)) is str:  # {str: type}: a mapping
        if not isinstance(value, dict):
            return f"{where or 'value'}: expected a mapping"
        item = next(iter(shape.values()))
        for key, v in value.items():
            if not isinstance(v, item):
                return f"{where}.{key}: expected {getattr(item, '__name__', 'text')}"
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where or 'the file'}: expected a mapping"
        for key, sub in shape.items():
            if key in value:
                wrong = _wrong_shape(value[key], sub, f"{where}.{key}" if where else key)
                if wrong:
                    return wrong
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where}: expected a list"
        for i, v in enumerate(value):
            if not isinstance(v, shape[0]):
                return f"{where}[{i}]: expected {getattr(shape[0], '__name__', 'text')}"
        return None
    if not isinstance(value, shape) or isinstance(value, bool) and shape is not bool:
        return f"{where}: expected {getattr(shape, '__name__', 'text or null')}"
    return None


def inputs_unchanged(lock: Lock, directory: Path) -> bool:
    """True when every file the lock was made from (cudabox.yaml first, then the files it references) still
    has the bytes it had: reading cudabox.yaml again would give the lock's inputs_hash, so `run` need not
    parse it (no YAML, no matrix). False means "not known": ask load_spec."""
    import hashlib

    if not lock.inputs or lock.inputs[0][0] != SPEC_INPUT:
        return False
    whole = hashlib.sha256()
    for name, sha in lock.inputs:
        try:
            data = read_input(Path(directory) / name)  # bounded, regular files only
        except CudaboxError:
            return False
        if hashlib.sha256(data).hexdigest() != sha:
            return False
        whole.update(data)
    return whole.hexdigest() == lock.inputs_hash


def is_stale(directory: Path = Path("."), *, build_inputs: bool = False) -> tuple[bool, str]:
    """(stale?, why). A lock is stale when cudabox.yaml (or its requirements file) changed since."""
    from ..project.spec import load_spec

    lock = read_lock(directory)  # intact: its content matches its lock_hash
    spec = load_spec(directory)
    if spec.inputs_hash != lock.inputs_hash:
        before, now = dict(lock.inputs), dict(spec.inputs)
        changed = [f for f in now if f in before and before[f] != now[f]] + \
                  [f for f in now if f not in before and before] + [f for f in before if f not in now]
        what = ", ".join(changed) if changed else spec.source_file
        return True, f"{what} changed since {LOCK_FILE} was written"
    changed = build_inputs_changed(lock, directory) if build_inputs else None
    if changed:
        return True, changed
    return False, f"{LOCK_FILE} is up to date with {spec.source_file}"


def build_inputs_changed(lock: Lock, directory: Path) -> str | None:
    """What changed in the stack image's inputs outside cudabox.yaml (the uv pin, the smoke test), or None.
    `lock --check` asks (it may read the matrix); steps after lock don't: render refuses a changed smoke.py."""
    from ..knowledge.loader import load
    from ..resolve.facts import build_inputs

    tools, smoke = build_inputs(load(directory))
    if lock.stack.tools != tools:
        return f"the build tools changed since {LOCK_FILE} was written ({lock.stack.tools} -> {tools})"
    if lock.stack.smoke != smoke:
        return f"the smoke test (smoke.py or its thresholds) changed since {LOCK_FILE} was written"
    return None


def check_lock(directory: Path = Path("."), *, build_inputs: bool = False) -> str:
    """Raise CheckFailed when the lock is stale. `build_inputs` (`lock --check`) also compares the uv pin and
    the smoke test with the matrix; steps after lock (build) don't read the matrix, so they leave it off."""
    stale, why = is_stale(directory, build_inputs=build_inputs)
    if stale:
        raise CheckFailed(f"{why}; run `cudabox lock`")
    return why
