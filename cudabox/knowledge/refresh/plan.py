"""The refresh plan: every subject's changes, each framework before its companions, cuDNN and CUDA last."""

from __future__ import annotations

from ...errors import InputError
from ..overlay import declared
from ..pypi import Client
from . import cuda, frameworks as fw
from .reader import Plan, Planner, Reader

# The frameworks whose PyPI metadata refresh can read: each project states its CUDA pins its own way
# (torch's nvidia-* Requires-Dist and download.pytorch.org, tensorflow[and-cuda], jax's plugins), so
# each needs a reader here. A framework frameworks.yaml declares without one is kept by hand.
READERS = {"torch": fw.torch, "tensorflow": fw.tensorflow, "jax": fw.jax}
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
    p = Planner(Reader(client, progress), docs)
    for name in selected:
        if name in READERS:
            READERS[name](p)
        elif name in companions:
            fw.companions(p, name)
    cuda.cudnn(p, everything="cudnn" in selected)
    cuda.cuda(p, everything="cuda" in selected)
    p.plan.notes[:0] = p.r.notes
    return p.plan
