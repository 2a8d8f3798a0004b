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
from functools import lru_cache

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .environment import Chooser, EnvProblem, cudnn_words, series_label
from ..errors import Unsatisfiable
from ..knowledge.matrix import Matrix
from ..knowledge.model import Build, cuda_version
from .request import Request
from .stack import Stack
from .ways import nearest_known, ways_out


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
        self.wants, self.others = m.frameworks.split(request.requirements, known_variants(m), env=dict(request.env))
        self.env = Chooser(m, request, self.wants)
        self.problems: list[Problem] = []
        self._pairs: dict[tuple[int, int], bool] = {}

    def _note(self, kind: str, text: str, build: Build | None = None, other: Build | None = None):
        self.problems.append(Problem(kind, text, build, other))

    # ---- candidates

    def candidates(self, framework: str) -> list[Build]:
        want = self.wants[framework]
        builds = self.m.builds_of(framework)
        matching = [b for b in builds if _version(b.version) in want.spec
                    and (want.variant is None or b.variant == want.variant)]
        if not matching:
            variants = sorted({b.variant for b in builds})
            detail = f"nearest known: {nearest_known(self.m, framework, want.spec)}"
            if want.variant and want.variant not in variants:
                detail += f"; variants: {', '.join(variants)}"
            self._note("unknown", f"no {framework} release in the matrix matches {want.describe()} ({detail}); "
                                  "`cudabox matrix refresh` adds releases published since the bundle")
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
        fits = [c for c in releases if c.pin is None or _version(build.version) in _spec(c.pin)]
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

    def _companions(self, combo) -> list[tuple]:
        out = []
        for name, fw in self.m.frameworks.companions.items():
            build = next((b for b in combo if b.framework == fw.name), None)
            if name in self.wants and build is not None:
                c = self.companion_for(name, build)
                out.append((name, c, build))
        return out

    # ---- rule 3: one environment

    def _pair_problem(self, combo) -> bool:
        for a, b in itertools.combinations(combo, 2):
            key = (id(a), id(b))  # builds live as long as the matrix; each pair is judged (and noted) once
            if key not in self._pairs:
                problem = pair_conflict(self.m, a, b)
                self._pairs[key] = problem is not None
                if problem:
                    kind, text = problem
                    self._note(f"pair:{a.framework}:{b.framework}:{kind}", text, a, b)
            if self._pairs[key]:
                return True
        return False

    def _finish(self, stack: Stack, combo: list[Build]) -> Stack:
        why = list(self.req.context)
        why += [line for want in self.wants.values() for line in want.why]  # a frontend's backend (keras)
        for line in stack.why:
            why.append(line)
            for b in combo:  # say why a newer CUDA variant of the chosen release was passed over
                if line.startswith(f"{b.framework} {b.version} ("):
                    why += [f"  passed over: {p.text}" for p in self._refused_variants(b)]
        warnings = list(stack.warnings) + self._retired()
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

    def _retired(self) -> list[str]:
        return [f"{name}: {fw.retired}" for name in self.wants
                if (fw := self.m.frameworks.get(name)) is not None and fw.retired]

    def _unsatisfiable(self) -> Unsatisfiable:
        reasons = summarize(self.problems) or ["no combination of the matrix's releases satisfies the request"]
        reasons += self._retired()
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


@lru_cache(maxsize=4096)
def _spec(text: str) -> SpecifierSet:
    return SpecifierSet(text)


@lru_cache(maxsize=4096)
def _version(text: str) -> Version:
    return Version(text)


@lru_cache(maxsize=1024)
def _pythons(python, known: tuple[str, ...]) -> frozenset:
    return frozenset(p for p in known if python.allows(p))


@lru_cache(maxsize=1024)
def _cudnn_meet(a: str, b: str, versions: tuple[str, ...]) -> bool:
    both = _spec(a) & _spec(b)
    return any(_version(v) in both for v in versions)


def pair_conflict(m: Matrix, a: Build, b: Build) -> tuple[str, str] | None:
    """Can two framework builds share one Python environment? None, or (kind, the conflicting facts).
    Called for every candidate pair, so the checks are memoised on the (hashable) facts they read."""
    if not _pythons(a.python, m.known_pythons) & _pythons(b.python, m.known_pythons):
        return "python", (f"{series_label(a)} supports Python {a.python.describe()} but {series_label(b)} "
                          f"supports {b.python.describe()}; no Python fits both")
    la, lb = series_label(a), series_label(b)
    if a.cuda_major != b.cuda_major:
        return "cuda-major", (f"{la} uses CUDA {a.cuda_major} but {lb} uses CUDA {b.cuda_major}; "
                              "one environment can't hold both")
    if a.cudnn and b.cudnn:
        if not _cudnn_meet(a.cudnn, b.cudnn, m.cudnn_versions):
            return "cudnn", f"{la} {cudnn_words(a.cudnn)} but {lb} {cudnn_words(b.cudnn)}"
    for sys_b, wheel_b in ((a, b), (b, a)):  # one libcudnn.so.<major> per process: the system's or the wheel's
        if sys_b.system_cudnn and wheel_b.cudnn:
            major = sys_b.system_cudnn.split(".")[0]
            same = [c for c in m.cudnn_builds() if Version(c.version) in SpecifierSet(wheel_b.cudnn)
                    and c.version.split(".")[0] == major]
            if same and not any(Version(c.version) >= Version(sys_b.system_cudnn) for c in same):
                return "cudnn", (f"{series_label(sys_b)} needs cuDNN {sys_b.system_cudnn} from the system but "
                                 f"{series_label(wheel_b)} {cudnn_words(wheel_b.cudnn)}: both load "
                                 f"libcudnn.so.{major}, and one environment loads one")
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
        exc.reasons += ways_out(m, request, resolver.wants, Resolver)
        raise
