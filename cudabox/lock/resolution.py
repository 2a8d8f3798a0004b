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

    from .packages import compile_pins

    spec = res.spec
    index_url = os.environ.get("CUDABOX_PIP_INDEX_URL") or spec.index_url
    extra = os.environ.get("CUDABOX_PIP_EXTRA_INDEX_URL", "").split() or list(spec.extra_index_urls)
    ca = os.environ.get("CUDABOX_CA_CERT") or None
    old_stack = (previous.stack.pins or ()) if previous else ()
    old_project = (previous.project.pins or ()) if previous else ()
    stack = pin_stack(res.stack, uv=uv, index_url=index_url, extra_index_urls=extra, ca_cert=ca, previous=old_stack,
                      upgrade=upgrade, upgrade_packages=upgrade_packages)
    project_pins = []
    if res.others:
        full = compile_pins(stack_wanted(stack) + list(res.others), constraints=stack.pins,
                            previous=list(old_stack) + list(old_project), **_common(stack, uv, index_url, extra, ca,
                                                                                     upgrade, upgrade_packages))
        mine = {p.name for p in stack.pins}
        project_pins = [p for p in full if p.name not in mine]
    return stack, tuple(project_pins)


def stack_wanted(stack) -> list[str]:
    """What the stack's venv holds: its requirements, and pip (the venv is made without seed packages, so
    it holds exactly the lock)."""
    return list(stack.requirements) + SEED


def _common(stack, uv, index_url, extra_index_urls, ca_cert, upgrade, upgrade_packages) -> dict:
    from ..errors import InputError

    if not stack.platform:
        raise InputError(f"matrices/images.yaml gives no glibc for {stack.os}: cannot lock wheels for its platform")
    return dict(uv=uv, python=stack.python, platform=stack.platform, sources=stack.indexes, index_url=index_url,
                extra_index_urls=list(extra_index_urls), upgrade=upgrade, upgrade_packages=upgrade_packages,
                ca_cert=ca_cert)


def pin_stack(stack, *, uv: str, index_url: str | None = None, extra_index_urls=(), ca_cert: str | None = None,
              previous=(), upgrade: bool = False, upgrade_packages=()):
    """The stack with its closure (frameworks, companions, everything they pull in, pip) and its build
    tools pinned and hashed for its platform and Python. Raises CompileFailed (packages.py)."""
    from .packages import compile_pins

    common = _common(stack, uv, index_url, extra_index_urls, ca_cert, upgrade, upgrade_packages)
    pins = compile_pins(stack_wanted(stack), previous=previous, **common)
    return replace(stack, pins=tuple(pins), tool_pins=tool_pins(stack, common))


def tool_pins(stack, common: dict):
    """The build tools' wheels for the image's platform (uv, installed in a throwaway build stage), hashed
    like the packages (the uv stage installs this file, not `uv==X` by version); None when the stack
    names no uv."""
    from ..errors import Unsatisfiable
    from .packages import CompileFailed, compile_pins, why_not

    if not stack.tools.get("uv"):
        return None
    args = dict(common, sources={}, upgrade=False, upgrade_packages=())
    try:
        return tuple(compile_pins([f"uv=={stack.tools['uv']}"], **args))
    except CompileFailed as exc:  # not the Python's fault: no fallback would help
        raise Unsatisfiable(f"uv {stack.tools['uv']}, the images' installer, can't be locked from the package "
                            "index (the build installs it from there)",
                            [why_not(exc), "serve uv from the index (a PyPI mirror has it), or use the "
                             "index that has it (index_url / CUDABOX_PIP_INDEX_URL)"]) from None
