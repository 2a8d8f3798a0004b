"""A project's resolution, shared by `resolve`, `lock`, `init` and `run`: spec + host + matrix -> stack."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet

from .. import host as host_mod
from ..knowledge.matrix import Matrix
from ..knowledge.loader import load
from ..knowledge.model import GPU
from ..resolve.request import Request, request_from_spec
from ..resolve.resolver import resolve
from ..project.spec import ProjectSpec
from ..resolve.stack import Stack

if TYPE_CHECKING:  # `resolve` needs no lock: lockfile is imported when one is made
    from .lockfile import Lock


@dataclass(frozen=True)
class Resolution:
    spec: ProjectSpec
    request: Request
    stack: Stack
    others: tuple[str, ...]
    host: host_mod.Host

    def lock(self, project_pins=None) -> Lock:
        from .lockfile import make_lock

        return make_lock(self.spec, self.stack, list(self.others), project_pins)


def host_gpus(m: Matrix, host: host_mod.Host) -> tuple[list[GPU], list[str]]:
    """Host GPUs as matrix GPUs; unknown models fall back to their compute capability."""
    gpus, notes = [], []
    for g in host.gpus:
        found = m.find_gpu(g.name)
        if found is None and g.cc:
            found = m.gpu(g.cc)
            notes.append(f"host GPU {g.name!r} is not in the matrix; using its compute capability {g.cc}")
        if found is None:
            notes.append(f"host GPU {g.name!r} is not in the matrix and reports no compute capability; ignored")
            continue
        gpus.append(found)
    return gpus, notes


def resolve_project(spec: ProjectSpec, *, matrix: Matrix | None = None, no_host: bool = False,
                    host: host_mod.Host | None = None, **overrides) -> Resolution:
    """Resolve a project. Explicit values (flags, then cudabox.yaml) win over what the host reports."""
    m = matrix or load(spec.directory)
    host = host or host_mod.detect(ignore=no_host)
    context = []
    driver, gpus = None, []
    if not spec.driver or not spec.gpus:
        gpus, notes = host_gpus(m, host)
        context += notes
        driver = host.driver
        if host.ignored:
            context.append("host ignored (--no-host): no driver or GPU constraint beyond the project's")
        elif host.driver or host.gpus:
            context.append(f"host: {host.describe()}")
        else:
            context.append("no NVIDIA driver or GPU on this host: no host constraint; "
                           "the image's requirement says which driver it needs")
    request = request_from_spec(spec, m, driver=driver, host_gpus=tuple(gpus))
    if request.driver is not None and host.driver and spec.driver:
        context.append(f"driver {spec.driver} from {spec.source_file or 'flags'} (host has {host.driver})")
    request = replace(request, context=tuple(context), **{k: v for k, v in overrides.items() if v is not None})
    stack = resolve(m, request)
    _, others = m.frameworks.split(spec.requirements)
    return Resolution(spec=spec, request=request, stack=stack, others=tuple(others), host=host)


SEED = ["pip"]  # what `uv venv --seed` would fetch unlocked at build time; `run:` steps may use pip
FALLBACK_PYTHONS = 3  # older Pythons tried when the chosen one has no wheel for some package


def lock_project(spec: ProjectSpec, *, matrix: Matrix | None = None, no_host: bool = False,
                 host: host_mod.Host | None = None, previous: Lock | None = None, upgrade: bool = False,
                 upgrade_packages=(), packages: bool = True, **overrides) -> tuple[Resolution, Lock]:
    """Resolve the stack, then lock every package (lock/packages.py); when the full resolution fails for
    the chosen Python, try the next older ones every framework allows and say so in the why."""
    from .packages import CompileFailed, unsatisfiable, uv_binary, why_not

    m = matrix or load(spec.directory)
    host = host or host_mod.detect(ignore=no_host)
    res = resolve_project(spec, matrix=m, host=host, **overrides)
    if not packages:
        return res, res.lock()
    uv = uv_binary(m.tools["uv"].version)
    tried = []
    candidates = [res] + _older_pythons(spec, m, res, host, overrides)
    for attempt in candidates:
        try:
            stack, project_pins = _pin(attempt, uv, previous, upgrade, upgrade_packages)
        except CompileFailed as exc:
            tried.append((attempt.stack.python, exc))
            continue
        if tried:
            note = (f"Python {stack.python}: the packages can't all be installed on Python "
                    f"{', '.join(p for p, _ in tried)} ({why_not(tried[0][1])}); "
                    "the next older Python every framework allows")
            stack = replace(stack, why=stack.why + (note,))
        final = replace(attempt, stack=stack)
        return final, final.lock(project_pins)
    raise unsatisfiable(tried)


def _older_pythons(spec, m: Matrix, res: Resolution, host, overrides) -> list[Resolution]:
    from packaging.version import Version

    from ..errors import CudaboxError

    out = []
    older = [p for p in reversed(m.known_pythons) if Version(p) < Version(res.stack.python)]
    for python in older:
        if len(out) >= FALLBACK_PYTHONS:
            break
        if spec.python and Version(python) not in SpecifierSet(spec.python):
            continue
        try:
            out.append(resolve_project(spec, matrix=m, host=host, **dict(overrides, python=f"=={python}.*")))
        except CudaboxError:  # a framework doesn't allow it
            continue
    return out


def _pin(res: Resolution, uv: str, previous: Lock | None, upgrade: bool, upgrade_packages):
    import os

    from ..errors import InputError
    from .packages import compile_pins

    stack, spec = res.stack, res.spec
    if not stack.platform:
        raise InputError(f"matrices/images.yaml gives no glibc for {stack.os}: cannot lock wheels for its platform")
    index_url = os.environ.get("CUDABOX_PIP_INDEX_URL") or spec.index_url
    extra = os.environ.get("CUDABOX_PIP_EXTRA_INDEX_URL", "").split() or list(spec.extra_index_urls)
    ca = os.environ.get("CUDABOX_CA_CERT") or None
    common = dict(uv=uv, python=stack.python, platform=stack.platform, sources=stack.indexes, index_url=index_url,
                  extra_index_urls=extra, upgrade=upgrade, upgrade_packages=upgrade_packages, ca_cert=ca)
    old_stack = (previous.stack.pins or ()) if previous else ()
    old_project = (previous.project.pins or ()) if previous else ()
    # pip is locked with the stack: the image's venv is made without seed packages, so it holds exactly the lock
    wanted = list(stack.requirements) + SEED
    stack_pins = compile_pins(wanted, previous=old_stack, **common)
    project_pins = []
    if res.others:
        full = compile_pins(wanted + list(res.others), constraints=stack_pins,
                            previous=list(old_stack) + list(old_project), **common)
        mine = {p.name for p in stack_pins}
        project_pins = [p for p in full if p.name not in mine]
    return replace(stack, pins=tuple(stack_pins)), tuple(project_pins)
