"""The refresh plan: every subject's changes, torch before its companions, cuDNN and CUDA last."""

from __future__ import annotations

from ..pypi import Client
from . import cuda, frameworks as fw
from .reader import FRAMEWORKS, Plan, Planner, Reader, plain, projects_for


def plan(client: Client, docs: dict, frameworks=FRAMEWORKS, *, progress=None) -> Plan:
    """Compare PyPI with the current matrix documents; the changes that would bring it up to date."""
    p = Planner(Reader(client, progress, workers=32), docs)
    selected = [f for f in FRAMEWORKS if f in set(frameworks)]
    p.r.prefetch(projects_for(selected))  # every project JSON, then every METADATA, in one parallel pass
    fw.prefetch(p, selected)
    for name in selected:  # torch before its companions; cuDNN and CUDA last (they serve the pins)
        if name in ("torch", "tensorflow", "jax"):
            getattr(fw, name)(p)
        elif name in ("torchvision", "torchaudio"):
            fw.companions(p, name)
    cuda.cudnn(p, everything="cudnn" in selected)
    cuda.cuda(p, everything="cuda" in selected)
    p.plan.notes[:0] = p.r.notes
    p.plan.uploaded = {(name, v): r.uploaded for name, rels in p.r._releases.items() for v, r in rels.items()}
    return p.plan


def refreshed_on(docs: dict) -> str | None:
    """The date the bundled matrix was last refreshed (sources.yaml `refresh.refreshed`)."""
    value = ((plain(docs.get("sources") or {}).get("refresh")) or {}).get("refreshed")
    return str(value) if value is not None else None
