"""Ways out of a refusal (rule 9): re-resolve with one constraint relaxed, and say what that gives.

A relaxed pin prefers the release nearest to what was asked (torch 2.4.1+cu124 for a
`torch==2.4.1+cu118` project that needs CUDA 12.4), not the newest; a pin the matrix doesn't
know names the nearest releases it does know. The resolver class is passed in (this module sits
below resolver.py, which uses `nearest_known`).
"""

from __future__ import annotations

from dataclasses import replace

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import InputError, Unsatisfiable
from ..knowledge.matrix import Matrix
from ..knowledge.model import DriverVersion
from .request import Request

NEAREST_TRIES = 12  # releases tried, nearest first, before falling back to the newest that fits


def _versions_of(m: Matrix, name: str) -> list[str]:
    versions = {b.version for b in m.builds_of(name)} or {c.version for c in m.companions_of(name)}
    return sorted(versions, key=Version)


def _series(version: str) -> tuple[int, ...]:
    return Version(version).release[:2]


def _anchor(versions: list[str], spec: SpecifierSet) -> Version | None:
    """The version a pin asks for: the newest known one it matches, else the version it names."""
    matching = [v for v in versions if Version(v) in spec]
    if matching:
        return Version(matching[-1])
    for clause in spec:
        try:
            return Version(clause.version.rstrip(".*"))
        except InvalidVersion:
            continue
    return None


def nearest_versions(m: Matrix, name: str, spec: SpecifierSet) -> list[str]:
    """Known releases of `name` to try, nearest to what `spec` asks first: the asked release, then the
    newest patch of each series by distance from the asked one (newer before older at equal distance)."""
    versions = _versions_of(m, name)
    anchor = _anchor(versions, spec)
    newest = {}
    for v in versions:  # oldest first: the last patch of a series wins
        newest[_series(v)] = v
    if anchor is None:
        return list(reversed(newest.values()))
    series = sorted(set(newest) | {anchor.release[:2]})
    at = series.index(anchor.release[:2])
    ordered = sorted(newest, key=lambda s: (abs(series.index(s) - at), -series.index(s)))
    out = [str(anchor)] if str(anchor) in versions else []
    return out + [newest[s] for s in ordered if newest[s] not in out]


def nearest_known(m: Matrix, name: str, spec: SpecifierSet) -> str:
    """ "2.3.1, 2.4.0": the known releases just below and above what the pin asks for."""
    versions = _versions_of(m, name)
    anchor = _anchor(versions, spec)
    if not versions:
        return "none known"
    if anchor is None:
        return f"{versions[0]} … {versions[-1]}"
    below = [v for v in versions if Version(v) < anchor]
    above = [v for v in versions if Version(v) > anchor]
    return ", ".join(([below[-1]] if below else []) + ([above[0]] if above else []))


def ways_out(m: Matrix, request: Request, wants, resolver_cls) -> list[str]:
    """Re-resolve with one constraint relaxed; each success is a suggestion."""
    tries = []
    if request.driver is not None:
        for driver in _driver_upgrades(m, request.driver):
            tries.append(("driver", replace(request, driver=driver)))
    for w in (w for w in wants.values() if str(w.spec) or w.variant):
        others = tuple(r for r in request.requirements if not _is_for(m, r, w.name))
        mine = [r for r in request.requirements if _is_for(m, r, w.name)]
        extras = sorted({e for r in mine for e in Requirement(r).extras})
        bare = w.name + (f"[{','.join(extras)}]" if extras else "")
        for version in nearest_versions(m, w.name, w.spec)[:NEAREST_TRIES]:
            tries.append((f"requirement:{w.name}", replace(request, requirements=others + (f"{bare}=={version}",))))
        tries.append((f"requirement:{w.name}:newest", replace(request, requirements=others + (bare,))))
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
        if what.removesuffix(":newest") in done:
            continue
        try:
            stack = resolver_cls(m, relaxed).resolve()
        except (Unsatisfiable, InputError):
            continue
        done.add(what.removesuffix(":newest"))
        out.append("way out: " + _suggest(what, stack, relaxed, wants))
    return out


def _driver_upgrades(m: Matrix, current: DriverVersion) -> list[DriverVersion]:
    """Newer drivers to try, smallest first: each toolkit's first driver above the current one."""
    drivers = {tk.min_driver for tk in m.toolkits if tk.min_driver and tk.min_driver > current}
    return sorted(drivers)


def _is_for(m: Matrix, requirement: str, name: str) -> bool:
    n = Requirement(requirement).name
    fw = m.frameworks.pip(n)
    return (fw.name if fw else canonicalize_name(n)) == name


def _suggest(what: str, stack, request: Request, wants) -> str:
    picks = ", ".join(f"{f.name} {f.version} ({f.variant})" for f in stack.frameworks) or f"CUDA {stack.cuda}"
    if what == "driver":
        return f"upgrade the driver to >= {request.driver} (then: {picks})"
    if what.startswith("requirement:"):
        name = what.split(":")[1]
        pick = next((f for f in stack.frameworks if f.name == name), None)
        which = "the newest release" if what.endswith(":newest") else f"the release nearest to {wants[name].describe()}"
        if pick:
            return f"use {name} {pick.version} ({pick.variant}), {which} that fits everything else"
        version = stack.packages.get(name)
        return f"use {name} {version}, {which} that fits (then: {picks})" if version \
            else f"relax the {name} requirement (then: {picks})"
    if what == "cuda":
        return f"drop the cuda constraint (then CUDA {stack.cuda}: {picks})"
    if what == "python":
        return f"use Python {stack.python} (then: {picks})"
    if what.startswith("gpu:"):
        return f"drop target GPU {what.split(':', 1)[1]} (then: {picks})"
    return f"use flavour {stack.flavour} (then: {picks})"
