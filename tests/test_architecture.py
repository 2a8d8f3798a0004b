"""The house's rules, read from the imports themselves (docs/architecture.md).

Every `import` in cudabox/ is parsed with `ast`, lazy ones inside functions
included (a lazy import is still a dependency). Three rules:

- no import cycles between modules;
- no module imports another module's `_private` names;
- data flows one way: a module never imports from a later stage than its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cudabox"

# The stages in pipeline order. A module may import its own stage and earlier ones only.
# `base` is what every stage shares; `doors` are the ways out to the host's driver and the Docker engine.
STAGES = [
    ("base", ("cudabox", "cudabox.errors", "cudabox.files", "cudabox.paths", "cudabox.trust",
              "cudabox.interrupt")),
    ("doors", ("cudabox.host", "cudabox.engine")),
    ("knowledge", ("cudabox.knowledge",)),  # matrix, model, refresh, PyPI client
    ("project", ("cudabox.project",)),  # init: cudabox.yaml, detection
    ("resolve", ("cudabox.resolve",)),  # request -> stack
    ("lock", ("cudabox.lock",)),  # project resolution, cudabox.lock, init's plan
    ("image", ("cudabox.image",)),  # render, build, validate, catalog, smoke
    ("jobs", ("cudabox.jobs",)),  # run, Slurm, Kubernetes, fleet, doctor
    ("ci", ("cudabox.ci",)),  # the catalog's CI: workflow, CI builds
    ("cli", ("cudabox.cli",)),
    ("entry", ("cudabox.entry", "cudabox.__main__")),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, source: str, is_package: bool = False) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every cudabox import in one module."""
    package = name if is_package else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "cudabox"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "cudabox":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub, None, node.lineno) if sub in MODULES else (target, alias.name, node.lineno))
    return out


def _stage(module: str) -> int:
    best, found = -1, None
    for index, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "cudabox" and module.startswith(prefix + "."))
            if matches and len(prefix) > best:
                best, found = len(prefix), index
    assert found is not None, f"{module} belongs to no stage: add it to STAGES"
    return found


def later_stage_imports(edges: dict) -> list[str]:
    return [f"{name}:{line} ({STAGES[_stage(name)][0]}) imports {target} ({STAGES[_stage(target)][0]})"
            for name, imports in edges.items() for target, _, line in imports if _stage(target) > _stage(name)]


def private_imports(edges: dict) -> list[str]:
    return [f"{name}:{line}: {imported} from {target}" for name, imports in edges.items()
            for target, imported, line in imports
            if imported and imported.startswith("_") and not imported.startswith("__") and target != name]


def cycles(edges: dict) -> list[str]:
    graph = {name: sorted({t for t, _, _ in imports if t in edges and t != name}) for name, imports in edges.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    found = []

    def visit(node, path):
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                found.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])
    return found


EDGES = {name: _imports(name, path.read_text(encoding="utf-8"), path.name == "__init__.py")
         for name, path in MODULES.items()}


def test_every_module_has_a_stage():
    for name in MODULES:
        _stage(name)


def test_no_import_from_a_later_stage():
    wrong = later_stage_imports(EDGES)
    assert not wrong, "\n".join(wrong)


def test_no_private_names_from_other_modules():
    wrong = private_imports(EDGES)
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    found = cycles(EDGES)
    assert not found, "\n".join(found)


# One door per outside system: its client library is imported by that module only.
DOORS = {"docker": "cudabox.engine.docker", "kubernetes": "cudabox.jobs.k8s_run"}


def _third_party(source: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_one_door_per_outside_system():
    wrong = []
    for name, path in MODULES.items():
        for library in _third_party(path.read_text(encoding="utf-8")) & set(DOORS):
            if name != DOORS[library]:
                wrong.append(f"{name} imports {library} (only {DOORS[library]} may)")
        for target, _, line in EDGES[name]:
            if target == "cudabox.engine.docker" and not name.startswith("cudabox.engine"):
                wrong.append(f"{name}:{line} imports the Docker implementation; use cudabox.engine's interface")
    assert not wrong, "\n".join(wrong)


SLURM_COMMANDS = {"sbatch", "scontrol", "scancel", "sacct", "srun", "enroot"}


def test_slurm_commands_run_in_one_module():
    wrong = []
    for name, path in MODULES.items():
        if name == "cudabox.jobs.slurmctl":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in SLURM_COMMANDS:
                wrong.append(f"{name}:{node.lineno} names `{node.value}`: Slurm is run by cudabox.jobs.slurmctl")
    assert not wrong, "\n".join(wrong)


def test_the_checks_catch_what_they_claim():
    """Each rule fails on a made-up module that breaks it (lazy imports included)."""
    bad = {
        "cudabox.knowledge.matrix": _imports("cudabox.knowledge.matrix",
                                             "def f():\n    from ..jobs.run import parse_env\n"),
        "cudabox.jobs.run": _imports("cudabox.jobs.run", "from .slurm import _SAFE\nfrom . import run_io\n"),
        "cudabox.jobs.run_io": _imports("cudabox.jobs.run_io", "from .run import LABEL\n"),
        "cudabox.jobs.slurm": [],
    }
    assert later_stage_imports(bad) == ["cudabox.knowledge.matrix:2 (knowledge) imports cudabox.jobs.run (jobs)"]
    assert private_imports(bad) == ["cudabox.jobs.run:1: _SAFE from cudabox.jobs.slurm"]
    assert cycles(bad) == ["cudabox.jobs.run -> cudabox.jobs.run_io -> cudabox.jobs.run"]
