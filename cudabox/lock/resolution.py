"""A project's resolution, shared by `resolve`, `lock`, `init` and `run`: spec + host + matrix -> stack."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import host as host_mod
from .lockfile import Lock, make_lock
from ..knowledge.matrix import Matrix
from ..knowledge.loader import load
from ..knowledge.model import GPU
from ..resolve.request import Request, request_from_spec
from ..resolve.resolver import resolve
from ..project.spec import ProjectSpec
from ..resolve.stack import Stack


@dataclass(frozen=True)
class Resolution:
    spec: ProjectSpec
    request: Request
    stack: Stack
    others: tuple[str, ...]
    host: host_mod.Host

    def lock(self) -> Lock:
        return make_lock(self.spec, self.stack, list(self.others))


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
