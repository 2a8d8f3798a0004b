"""The resolver: from what a project needs and where it must run, one concrete stack — or the reasons why none.

Rules (docs/resolver.md): driver (native, minor-version or forward
compatibility), GPU coverage (SASS/PTX), one environment (shared cuDNN and
CUDA-library pins, one Python), companions follow their pins, preference
(newest framework versions, then newest CUDA, then newest Python), plain CUDA
stacks, and the base image. Every decision leaves a one-line reason.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from .environment import Chooser, EnvProblem, cudnn_words, series_label
from ..errors import InputError, Unsatisfiable
from ..knowledge.matrix import Matrix
from ..knowledge.model import Build, DriverVersion, cuda_version
from .request import Request
from .stack import Stack


def known_variants(m: Matrix) -> dict[str, set[str]]:
    """Framework -> the variants the matrix has builds of (what an extra may name)."""
    return {name: {b.variant for b in m.builds_of(name) if b.variant} for name in m.frameworks.names}

# --------------------------------------------------------------------------- the search


@dataclass(frozen=True)
class Problem:
    """Why a candidate was refused: a kind (for grouping), one line naming the facts, the builds involved."""

    kind: str
    text: str
    build: Build | None = None
    other: Build | None = None


class Resolver:
    """One resolution over one matrix. `resolve()` returns a Stack or raises Unsatisfiable."""

    def __init__(self, m: Matrix, request: Request):
        self.m, self.req = m, request
        self.wants, self.others = m.frameworks.split(request.requirements, known_variants(m))
        self.env = Chooser(m, request, self.wants)
        self.problems: list[Problem] = []

    def _note(self, kind: str, text: str, build: Build | None = None, other: Build | None = None):
        self.problems.append(Problem(kind, text, build, other))

    # ---- candidates

    def candidates(self, framework: str) -> list[Build]:
        want = self.wants[framework]
        builds = self.m.builds_of(framework)
        matching = [b for b in builds if Version(b.version) in want.spec
                    and (want.variant is None or b.variant == want.variant)]
        if not matching:
            known = sorted({b.version for b in builds}, key=Version)
            variants = sorted({b.variant for b in builds})
            detail = f"known: {known[0]} … {known[-1]}" if known else "none known"
            if want.variant and want.variant not in variants:
                detail += f"; variants: {', '.join(variants)}"
            self._note("unknown", f"no {framework} release in the matrix matches {want.describe()} ({detail})")
            return []
        matching = self._with_companions(framework, matching)
        ok = []
        for b in matching:
            problem = self.env.build_problem(b)
            if problem:
                self._note(problem[0], problem[1], b)
            else:
                ok.append(b)
        return ok

    def _with_companions(self, framework: str, builds: list[Build]) -> list[Build]:
        fw = self.m.frameworks.get(framework)
        for name in fw.companions if fw else ():
            if name not in self.wants:
                continue
            want = self.wants[name]
            releases = [c for c in self.m.companions_of(name) if Version(c.version) in want.spec]
            kept = [b for b in builds if self.companion_for(name, b, releases) is not None]
            if not kept:
                pins = ", ".join(f"{c.version}→{framework}{c.pin}" for c in releases[:4]) or "none match"
                self._note("companion", f"{want.describe()} pairs with no candidate {framework} release ({pins})")
            builds = kept
        return builds

    def companion_for(self, name: str, build: Build, releases=None):
        if releases is None:
            want = self.wants[name]
            releases = [c for c in self.m.companions_of(name) if Version(c.version) in want.spec]
        fits = [c for c in releases if c.pin is None or Version(build.version) in SpecifierSet(c.pin)]
        pinned = [c for c in fits if c.pin is not None]
        return max(pinned or fits, key=lambda c: Version(c.version), default=None)

    # ---- preference order

    def _versions(self, builds: list[Build]) -> list[list[Build]]:
        """Group builds by version, newest version first; within a version, the newest CUDA the driver
        runs natively first, then those it runs only in a compatibility mode."""
        groups: dict[str, list[Build]] = {}
        for b in builds:
            groups.setdefault(b.version, []).append(b)
        ordered = sorted(groups.items(), key=lambda kv: Version(kv[0]), reverse=True)

        def preference(b: Build, pip_major: int | None):
            # driver known: the newest CUDA it runs natively or under minor-version compatibility (the
            # coverage rule already demands SASS for every target GPU there); forward compatibility last.
            # No driver known: never a CUDA major newer than plain `pip install` gives.
            # With no target GPUs nothing shows that SASS covers them, so native still comes first then.
            mode = self.env.driver_mode(b.cuda)[0]
            within = mode != "unknown" or pip_major is None or b.cuda_major <= pip_major
            runs = mode in ("native", "unknown") or (mode == "minor-compat" and bool(self.req.gpus))
            return (runs, within, cuda_version(b.cuda), b.pypi_default)

        out = []
        for _, group in ordered:
            default = next((b for b in self.m.builds_of(group[0].framework)
                            if b.version == group[0].version and b.pypi_default), None)
            pip_major = default.cuda_major if default else None
            out.append(sorted(group, key=lambda b: preference(b, pip_major), reverse=True))
        return out

    def resolve(self) -> Stack:
        frameworks = [f for f in self.m.frameworks.names if f in self.wants]
        if not frameworks:
            return self._finish(self.env.plain_stack(self.others), [])
        per = {}
        for f in frameworks:
            per[f] = self._versions(self.candidates(f))
        if not all(per.values()):
            raise self._unsatisfiable()
        # Rule 5: newest versions first (lexicographic in requirement order), then newest CUDA variants.
        for version_choice in itertools.product(*(per[f] for f in frameworks)):
            for combo in itertools.product(*version_choice):
                if self._pair_problem(combo):
                    continue
                try:
                    stack = self.env.framework_stack(list(combo), self._companions(combo), self.others)
                except EnvProblem as exc:
                    self._note("environment", str(exc), combo[0])
                    continue
                return self._finish(stack, list(combo))
        raise self._unsatisfiable()

    def _companions(self, combo) -> list[tuple[str, str, Build]]:
        out = []
        for name, fw in self.m.frameworks.companions.items():
            build = next((b for b in combo if b.framework == fw.name), None)
            if name in self.wants and build is not None:
                c = self.companion_for(name, build)
                out.append((name, c.version, build))
        return out

    # ---- rule 3: one environment

    def _pair_problem(self, combo) -> bool:
        for a, b in itertools.combinations(combo, 2):
            problem = pair_conflict(self.m, a, b)
            if problem:
                kind, text = problem
                self._note(f"pair:{a.framework}:{b.framework}:{kind}", text, a, b)
                return True
        return False

    def _finish(self, stack: Stack, combo: list[Build]) -> Stack:
        why = list(self.req.context)
        for line in stack.why:
            why.append(line)
            for b in combo:  # say why a newer CUDA variant of the chosen release was passed over
                if line.startswith(f"{b.framework} {b.version} ("):
                    why += [f"  passed over: {p.text}" for p in self._refused_variants(b)]
        warnings = list(stack.warnings)
        for b in combo:
            if b.prov.status != "verified":
                warnings.append(f"{b.label}: matrix record is {b.prov.status} ({b.prov.origin})")
        from .facts import build_inputs, platform_of, run_facts

        tools, smoke = build_inputs(self.m)
        return replace(stack, why=tuple(why), warnings=tuple(warnings), runs_on=run_facts(self.m, stack, combo),
                       tools=tools, smoke=smoke, platform=platform_of(self.m, stack.os))

    def _refused_variants(self, chosen: Build) -> list[Problem]:
        seen, out = set(), []
        for p in self.problems:
            b = p.build
            if b is not None and b.framework == chosen.framework and b.version == chosen.version and \
                    cuda_version(b.cuda) > cuda_version(chosen.cuda) and b.variant not in seen:
                seen.add(b.variant)
                out.append(p)
        return out

    def _unsatisfiable(self) -> Unsatisfiable:
        reasons = summarize(self.problems) or ["no combination of the matrix's releases satisfies the request"]
        return Unsatisfiable("no stack satisfies the request", reasons)


def _series(b: Build) -> str:
    return ".".join(b.version.split(".")[:2])


def _span(builds) -> str:
    """torch builds -> "torch 2.1–2.3" (series range, oldest–newest)."""
    series = sorted({_series(b) for b in builds}, key=Version)
    name = builds[0].framework
    return f"{name} {series[0]}" if len(series) == 1 else f"{name} {series[0]}–{series[-1]}"


def summarize(problems: list[Problem]) -> list[str]:
    """One line per kind of refusal: the newest example, then how many more it stands for."""
    groups: dict[tuple, list[Problem]] = {}
    for p in problems:
        key = (p.kind, p.build.framework if p.build else None)
        groups.setdefault(key, []).append(p)
    lines = []
    for ps in groups.values():
        if ps[0].other is not None:  # a pair conflict: show the one closest to fitting (oldest partner)
            ps = sorted(ps, key=lambda p: Version(p.other.version))
        texts = list(dict.fromkeys(p.text for p in ps))
        line = texts[0]
        if len(texts) > 1:
            builds = [p.build for p in ps if p.build is not None]
            others = [p.other for p in ps if p.other is not None]
            scope = _span(builds) if builds else ""
            if others:
                scope += f" with {_span(others)}"
            line += f" (and {len(texts) - 1} similar: {scope})" if scope else f" (and {len(texts) - 1} similar)"
        lines.append(line)
    return lines


def pair_conflict(m: Matrix, a: Build, b: Build) -> tuple[str, str] | None:
    """Can two framework builds share one Python environment? None, or (kind, the conflicting facts)."""
    la, lb = series_label(a), series_label(b)
    if not any(a.python.allows(p) and b.python.allows(p) for p in m.known_pythons):
        return "python", (f"{la} supports Python {a.python.describe()} but {lb} supports "
                          f"{b.python.describe()}; no Python fits both")
    if a.cuda_major != b.cuda_major:
        return "cuda-major", (f"{la} uses CUDA {a.cuda_major} but {lb} uses CUDA {b.cuda_major}; "
                              "one environment can't hold both")
    if a.cudnn and b.cudnn:
        both = SpecifierSet(a.cudnn) & SpecifierSet(b.cudnn)
        if not any(Version(c.version) in both for c in m.cudnn_builds()):
            return "cudnn", f"{la} {cudnn_words(a.cudnn)} but {lb} {cudnn_words(b.cudnn)}"
    if a.cuda_runtime and b.cuda_runtime:
        ra, rb = SpecifierSet(a.cuda_runtime), SpecifierSet(b.cuda_runtime)
        exact = [s[2:] for s in (a.cuda_runtime, b.cuda_runtime) if s.startswith("==") and "," not in s]
        if exact and not all(Version(v) in ra and Version(v) in rb for v in exact):
            return "runtime", f"{la} pins the CUDA runtime wheel {a.cuda_runtime} but {lb} pins {b.cuda_runtime}"
    return None


# --------------------------------------------------------------------------- entry points


def resolve(m: Matrix, request: Request) -> Stack:
    """Resolve, and when that fails, add ways out (what relaxing one constraint would give)."""
    resolver = Resolver(m, request)
    try:
        return resolver.resolve()
    except Unsatisfiable as exc:
        exc.reasons += ways_out(m, request, resolver.wants)
        raise


def ways_out(m: Matrix, request: Request, wants=None) -> list[str]:
    """Re-resolve with one constraint relaxed; each success is a suggestion."""
    tries = []
    if request.driver is not None:
        for driver in _driver_upgrades(m, request.driver):
            tries.append(("driver", replace(request, driver=driver)))
    wants = wants if wants is not None else m.frameworks.split(request.requirements)[0]
    pinned = [w for w in wants.values() if str(w.spec) or w.variant]
    for w in pinned:
        loosened = tuple(r for r in request.requirements if not _is_for(m, r, w.name)) + (w.name,)
        tries.append((f"requirement:{w.name}", replace(request, requirements=loosened)))
    if request.cuda:
        tries.append(("cuda", replace(request, cuda=None)))
    if request.python:
        tries.append(("python", replace(request, python=None)))
    for g in request.gpus:
        tries.append((f"gpu:{g.name}", replace(request, gpus=tuple(x for x in request.gpus if x is not g))))
    if request.flavour != "auto":
        tries.append(("flavour", replace(request, flavour="auto")))
    out, done = [], set()
    for what, relaxed in tries:
        if what in done:
            continue
        try:
            stack = Resolver(m, relaxed).resolve()
        except (Unsatisfiable, InputError):
            continue
        done.add(what)
        out.append("way out: " + _suggest(what, stack, relaxed))
    return out


def _driver_upgrades(m: Matrix, current: DriverVersion) -> list[DriverVersion]:
    """Newer drivers to try, smallest first: each toolkit's first driver above the current one."""
    drivers = {tk.min_driver for tk in m.toolkits if tk.min_driver and tk.min_driver > current}
    return sorted(drivers)


def _is_for(m: Matrix, requirement: str, name: str) -> bool:
    from packaging.requirements import Requirement

    n = Requirement(requirement).name
    fw = m.frameworks.get(n)
    return (fw.name if fw else canonicalize_name(n)) == name


def _suggest(what: str, stack: Stack, request: Request) -> str:
    picks = ", ".join(f"{f.name} {f.version} ({f.variant})" for f in stack.frameworks) or f"CUDA {stack.cuda}"
    if what == "driver":
        return f"upgrade the driver to >= {request.driver} (then: {picks})"
    if what.startswith("requirement:"):
        name = what.split(":", 1)[1]
        pick = next((f for f in stack.frameworks if f.name == name), None)
        if pick:
            return f"use {name} {pick.version} ({pick.variant}), the newest that fits everything else"
        return f"relax the {name} requirement (then: {picks})"
    if what == "cuda":
        return f"drop the cuda constraint (then CUDA {stack.cuda}: {picks})"
    if what == "python":
        return f"use Python {stack.python} (then: {picks})"
    if what.startswith("gpu:"):
        return f"drop target GPU {what.split(':', 1)[1]} (then: {picks})"
    return f"use flavour {stack.flavour} (then: {picks})"
