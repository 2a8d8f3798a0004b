"""The refresh plan: every subject's changes, torch before its companions, cuDNN and CUDA last."""

from __future__ import annotations

from ..pypi import Client
from . import cuda, frameworks as fw
from .reader import FRAMEWORKS, Plan, Planner, Reader


def plan(client: Client, docs: dict, frameworks=FRAMEWORKS, *, progress=None) -> Plan:
    """Compare PyPI with the current matrix documents; the changes that would bring it up to date."""
    p = Planner(Reader(client, progress), docs)
    selected = [f for f in FRAMEWORKS if f in set(frameworks)]
    for name in selected:  # torch before its companions; cuDNN and CUDA last (they serve the pins)
        if name in ("torch", "tensorflow", "jax"):
            getattr(fw, name)(p)
        elif name in ("torchvision", "torchaudio"):
            fw.companions(p, name)
    cuda.cudnn(p, everything="cudnn" in selected)
    cuda.cuda(p, everything="cuda" in selected)
    p.plan.notes[:0] = p.r.notes
    return p.plan
