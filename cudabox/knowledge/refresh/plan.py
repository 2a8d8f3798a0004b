"""The refresh plan: every subject's changes, each framework before its companions, cuDNN and CUDA last."""

from __future__ import annotations

from ...errors import InputError
from ..overlay import declared, pypi_project
from ..pypi import Client
from . import cuda, frameworks as fw, torch
from .reader import Plan, Planner, Reader, plain, projects_for

# The frameworks whose PyPI metadata refresh can read: each project states its CUDA pins its own way
# (torch's nvidia-* Requires-Dist and download.pytorch.org, tensorflow[and-cuda], jax's plugins), so
# each needs a reader here (paddle: the plain paddlepaddle-gpu releases on PyPI; its builds on Paddle's own
# index are kept by hand, and MXNet, retired, has nothing more to read). A framework frameworks.yaml declares without one is kept by hand.
READERS = {"torch": torch.torch, "tensorflow": fw.tensorflow, "jax": fw.jax, "paddle": fw.paddle}
LAST = ("cudnn", "cuda")  # they serve the frameworks' pins


def refreshable(docs: dict) -> tuple[str, ...]:
    """What `--framework` accepts, in refresh order: frameworks with a reader and their companions, then cuDNN, CUDA."""
    out = []
    for name, _, companions in declared(docs["frameworks"]):
        if name in READERS:
            out += [name, *companions]
    return (*out, *LAST)


def plan(client: Client, docs: dict, frameworks=None, *, progress=None) -> Plan:
    """Compare PyPI with the current matrix documents; the changes that would bring it up to date.

    `frameworks`: the subjects to refresh (see `refreshable`); None: all of them.
    """
    known = refreshable(docs)
    unknown = [f for f in frameworks or () if f not in known]
    if unknown:
        raise InputError(f"--framework {unknown[0]}: refresh reads {', '.join(known)}")
    selected = [f for f in known if frameworks is None or f in set(frameworks)]
    companions = {c: name for name, _, cs in declared(docs["frameworks"]) for c in cs}
    p = Planner(Reader(client, progress, workers=32), docs)
    p.plan.cudnn_projects = tuple(cuda.cudnn_wheels(p.work))
    projects = {name: pypi_project(docs["frameworks"], name) or name for name in selected}
    p.r.prefetch(projects_for(selected, docs, p.plan.cudnn_projects, projects))  # every project JSON, then every METADATA, in one pass
    fw.prefetch(p, selected)
    for name in selected:  # torch before its companions; cuDNN and CUDA last (they serve the pins)
        if name in READERS:
            READERS[name](p)
        elif name in companions:
            torch.companions(p, name)
    cuda.cudnn(p, everything="cudnn" in selected)
    cuda.cuda(p, everything="cuda" in selected)
    p.plan.notes[:0] = p.r.notes
    p.plan.uploaded = {(name, v): r.uploaded for name, rels in p.r._releases.items() for v, r in rels.items()}
    return p.plan


def refreshed_on(docs: dict) -> str | None:
    """The date the bundled matrix was last refreshed (sources.yaml `refresh.refreshed`)."""
    value = ((plain(docs.get("sources") or {}).get("refresh")) or {}).get("refreshed")
    return str(value) if value is not None else None
