"""`cudabox fleet plan`: which stacks run on which nodes, and the newest that runs on all of them.

Nodes with the same GPU model and driver behave the same, so the plan works on
node classes. A stack "runs" on a class when the resolver's own rules accept
it there (docs/resolver.md): the driver runs its CUDA (natively or through
minor-version compatibility; forward compatibility only for non-slim stacks,
which carry cuda-compat) and its frameworks carry code for the GPU. The
fleet-wide stack is a resolution with every node's GPU and the oldest driver;
when none exists, the plan says which CUDA versions each class can run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from ..resolve.environment import Chooser
from ..errors import CudaboxError, InputError, Unsatisfiable
from ..files import read_input_text
from .inventory import Node
from ..knowledge.matrix import Matrix
from ..knowledge.model import cuda_version
from ..resolve.request import Request
from ..resolve.resolver import resolve
from ..resolve.stack import Stack


@dataclass(frozen=True)
class Candidate:
    """A concrete stack to place: the project's lock, or a catalog image."""

    name: str
    stack: Stack
    source: str  # lock | catalog

    @property
    def kind(self) -> str:
        return "+".join(self.stack.framework_names) or "cuda"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str
    mode: str | None = None  # native | minor-compat | forward-compat


@dataclass
class Plan:
    nodes: list[Node]
    candidates: list[Candidate]
    verdicts: dict = field(default_factory=dict)  # (candidate name, class) -> Verdict
    requirements: tuple[str, ...] = ()
    stack: Stack | None = None  # the fleet-wide resolution
    reasons: list[str] = field(default_factory=list)  # why it is unsatisfiable
    windows: dict = field(default_factory=dict)  # class -> [CUDA minors it runs]
    per_class: dict = field(default_factory=dict)  # class -> Stack | reasons (when no fleet-wide stack)
    checks: dict = field(default_factory=dict)  # node name -> its last `cudabox check` (last_checks())

    @property
    def classes(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys(n.klass for n in self.nodes))

    def members(self, klass) -> list[Node]:
        return [n for n in self.nodes if n.klass == klass]

    def runs_everywhere(self, candidate: Candidate) -> bool:
        return all(self.verdicts[(candidate.name, k)].ok for k in self.classes)

    def newest_everywhere(self) -> dict[str, Candidate]:
        """Per kind (torch, tensorflow, jax, plain cuda): the newest candidate that runs on every node."""
        out = {}
        for c in sorted((c for c in self.candidates if self.runs_everywhere(c)), key=_newness, reverse=True):
            out.setdefault(c.kind, c)
        return out


def _newness(c: Candidate):
    frameworks = tuple(Version(f.version) for f in c.stack.frameworks)
    return frameworks, cuda_version(c.stack.cuda), Version(c.stack.python)


# --------------------------------------------------------------------------- candidates


def candidates(project_dir: Path | None, catalog_dir: Path | None) -> list[Candidate]:
    """The project's locked stack (if any) and every catalog image's stack.json (if present)."""
    from ..lock.lockfile import LOCK_FILE, read_lock

    out = []
    if project_dir is not None and (Path(project_dir) / LOCK_FILE).exists():
        lock = read_lock(project_dir)
        out.append(Candidate(f"{lock.project.name} ({LOCK_FILE})", lock.stack, "lock"))
    if catalog_dir is not None and Path(catalog_dir).is_dir():
        for path in sorted(Path(catalog_dir).glob("*/*/stack.json")):
            try:
                data = json.loads(read_input_text(path))  # bounded
                stack = Stack.from_dict(data)
            except (CudaboxError, ValueError, TypeError) as exc:
                raise InputError(f"{path}: not a catalog stack.json ({exc})") from None
            name = data.get("image") or f"{path.parent.parent.name}:{path.parent.name}"
            out.append(Candidate(name, stack, "catalog"))
    return out


# --------------------------------------------------------------------------- one stack on one node class


def stack_runs(m: Matrix, stack: Stack, node: Node, *, allow_forward_compat: bool = False) -> Verdict:
    """Would this built stack run on this node? The lock's own answer (cudabox/lock/fit.py), after the one
    fact about the node alone the matrix knows: a driver older than the first toolkit that knows its GPU."""
    from ..lock.fit import Gpu, stack_runs as fits

    chooser = Chooser(m, Request(gpus=(node.gpu,), driver=node.driver))
    if chooser.host_problems:
        return Verdict(False, chooser.host_problems[0])
    if stack.runs_on is None:
        stack = _with_facts(m, stack)
        if isinstance(stack, str):
            return Verdict(False, stack)
    fit = fits(stack, node.driver, [Gpu(node.gpu.name, node.gpu.cc, node.gpu.datacenter)])
    return Verdict(fit.ok, fit.why, fit.mode)


def _with_facts(m: Matrix, stack: Stack) -> Stack | str:
    """A stack.json written before run facts existed: derive them from the matrix (fleet plan's own input),
    or say why not."""
    from ..resolve.facts import run_facts

    builds = [b for pick in stack.frameworks for b in m.builds_of(pick.name)
              if b.version == pick.version and b.variant == pick.variant]
    if len(builds) != len(stack.frameworks):
        missing = next(p for p in stack.frameworks if not any(b.framework == p.name and b.version == p.version
                                                              and b.variant == p.variant for b in builds))
        return f"{missing.name} {missing.version} ({missing.variant}) is not in the matrix"
    if not stack.frameworks and m.toolkit(stack.cuda) is None:
        return f"CUDA {stack.cuda} is not in the matrix"
    return replace(stack, runs_on=run_facts(m, stack, builds))


def cuda_window(m: Matrix, node: Node) -> list[str]:
    """The CUDA minors a node class can run at all: driver (native or minor-compat) and GPU both."""
    return [tk.version for tk in m.toolkits
            if (m.runs_natively(node.driver, tk.version) or m.minor_compatible(node.driver, tk.version))
            and tk.can_compile(node.gpu.cc)]


# --------------------------------------------------------------------------- the plan


def plan(m: Matrix, nodes: list[Node], cands: list[Candidate], request: Request | None = None, *,
         allow_forward_compat: bool = False) -> Plan:
    """Place every candidate on every node class; resolve `request` (if any) for the whole fleet."""
    result = Plan(nodes=nodes, candidates=cands)
    first = {n.klass: n for n in reversed(nodes)}
    for klass in result.classes:
        node = first[klass]
        result.windows[klass] = cuda_window(m, node)
        for c in cands:
            result.verdicts[(c.name, klass)] = stack_runs(m, c.stack, node, allow_forward_compat=allow_forward_compat)
    if request is None:
        return result
    gpus = tuple(dict.fromkeys(n.gpu for n in nodes))
    oldest = min(n.driver for n in nodes)
    result.requirements = request.requirements
    fleet = replace(request, gpus=gpus, driver=oldest,
                    allow_forward_compat=allow_forward_compat or request.allow_forward_compat,
                    context=(f"fleet: {len(nodes)} node(s), GPUs {', '.join(g.name for g in gpus)}; "
                             f"oldest driver {oldest}",))
    try:
        result.stack = resolve(m, fleet)
        return result
    except Unsatisfiable as exc:
        result.reasons = window_reasons(result) + list(exc.reasons)
    for klass in result.classes:  # what each class would get on its own: the way to split the fleet
        node = first[klass]
        try:
            result.per_class[klass] = resolve(m, replace(request, gpus=(node.gpu,), driver=node.driver,
                                                         context=()))
        except CudaboxError as exc:
            result.per_class[klass] = [str(exc)] + list(getattr(exc, "reasons", []))
    return result


def last_checks(nodes: list[Node], results: dict[str, dict]) -> dict[str, dict]:
    """node name -> its last `cudabox check` in brief (status, when, level, speed), for the nodes checked."""
    out = {}
    for node in nodes:
        report = results.get(node.name) or results.get(node.name.split(".")[0])
        if report is None:
            continue
        perf = report.get("perf") or {}
        out[node.name] = {"status": report.get("status"), "checked_at": report.get("checked_at"),
                          "level": report.get("level"), "gemm_tflops": perf.get("gemm_tflops"),
                          "gemm_fraction": perf.get("gemm_fraction"), "bandwidth_gbs": perf.get("bandwidth_gbs"),
                          "failed": list(dict.fromkeys(c["name"] for c in report.get("checks") or ()
                                                       if c.get("status") == "fail"))}
    return out


def window_reasons(result: Plan) -> list[str]:
    """Name the facts when the node classes share no CUDA version at all."""
    windows = result.windows
    common = set.intersection(*(set(w) for w in windows.values())) if windows else set()
    if common:
        newest = max(common, key=cuda_version)
        return [f"every node can run CUDA {newest} (the newest common CUDA version); "
                "the requirements rule out the stacks that use it"]
    lines = ["no CUDA version runs on every node"]
    for klass, window in windows.items():
        gpu, driver = klass
        span = f"CUDA {window[0]}–{window[-1]}" if window else "no CUDA version at all"
        lines.append(f"{gpu} with driver {driver} ({len(result.members(klass))} node(s)) runs {span}")
    return lines


def to_dict(result: Plan) -> dict:
    """The plan for scripts (--json)."""
    classes = []
    for klass in result.classes:
        gpu, driver = klass
        entry = {"gpu": gpu, "driver": driver, "nodes": [n.name for n in result.members(klass)],
                 "gpus_per_node": sorted({n.count for n in result.members(klass)}),
                 "cuda_window": result.windows.get(klass, []),
                 "runs": [c.name for c in result.candidates if result.verdicts[(c.name, klass)].ok],
                 "refused": {c.name: result.verdicts[(c.name, klass)].why for c in result.candidates
                             if not result.verdicts[(c.name, klass)].ok},
                 "last_checks": {n.name: result.checks.get(n.name) for n in result.members(klass)}}
        if klass in result.per_class:
            own = result.per_class[klass]
            entry["own_stack"] = _stack_summary(own) if isinstance(own, Stack) else {"reasons": own}
        classes.append(entry)
    newest = {kind: c.name for kind, c in result.newest_everywhere().items()}
    out = {"classes": classes, "everywhere": [c.name for c in result.candidates if result.runs_everywhere(c)],
           "newest_everywhere": newest}
    if result.requirements or result.stack or result.reasons:
        out["fleet_stack"] = _stack_summary(result.stack) if result.stack else None
        out["requirements"] = list(result.requirements)
        out["reasons"] = result.reasons
    return out


def _stack_summary(stack: Stack) -> dict:
    return {"cuda": stack.cuda, "python": stack.python, "requirement": stack.requirement,
            "min_driver": stack.min_driver, "driver_mode": stack.driver_mode,
            "frameworks": [f"{f.name} {f.version} ({f.variant})" for f in stack.frameworks],
            "packages": stack.packages, "stack_hash": stack.hash}


def describe(stack: Stack) -> str:
    picks = ", ".join(f"{f.name} {f.version} ({f.variant})" for f in stack.frameworks) or "plain CUDA"
    return f"{picks}, CUDA {stack.cuda}, Python {stack.python} (requires {stack.requirement})"


# --------------------------------------------------------------------------- `cudabox fleet plan`


def request_for(project: Path, m: Matrix, with_, python, cuda) -> Request | None:
    """What the whole fleet must run: --with requirements, else the project's cudabox.yaml (its own GPUs and
    driver dropped: the fleet's nodes say those), else a bare --cuda; None: place stacks only."""
    from dataclasses import replace

    from ..knowledge.values import flag_values
    from ..project.spec import SPEC_FILE, load_spec, spec_from_flags
    from ..resolve.request import request_from_spec

    values = flag_values(python=python, cuda=cuda)
    if with_:
        return request_from_spec(spec_from_flags(project, list(with_), **values), m)
    if (Path(project) / SPEC_FILE).exists():
        spec = replace(load_spec(project, has_with=True), gpus=(), driver=None, **values)  # fleet plan has --with
        return request_from_spec(spec, m)
    if values.get("cuda"):
        return Request(python=values.get("python"), cuda=values["cuda"])
    return None


def gres_pairs(items) -> tuple[tuple[str, str], ...]:
    """--gres-map TYPE=GPU values, checked."""
    pairs = []
    for item in items or ():
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise InputError(f"--gres-map {item!r}: expected TYPE=GPU (e.g. a100=A100)")
        pairs.append((key, value))
    return tuple(pairs)


def plan_fleet(project: Path, inventory: Path, *, with_=None, python=None, cuda=None, driver=None, gres_map=(),
               catalog: Path | None = None, no_catalog: bool = False, allow_forward_compat: bool = False) -> Plan:
    """Read the inventory, gather the candidate stacks (lock, catalog), place them, and resolve the request."""
    from .. import paths
    from ..knowledge.loader import load
    from .inventory import Options, read_inventory

    m = load(project)
    nodes = read_inventory(inventory, m, Options(default_driver=driver, gres_map=gres_pairs(gres_map)))
    cands = candidates(project, None if no_catalog else (catalog or paths.catalog_dir()))
    return plan(m, nodes, cands, request_for(project, m, with_, python, cuda),
                allow_forward_compat=allow_forward_compat)
