"""cudabox's images on this engine: which projects use each, when it last ran, and which can go.

GPU images are big (several GB a stack). An image is cudabox's when it carries the stack label cudabox
builds into every image (io.cudabox.stack.hash); nothing else is ever listed or removed. A project image
is referenced when a known project's lock (lock/known.py) has its lock hash; a stack image when such a
lock, or a kept project image, is built on it. The space an image frees is computed from the layer
chains, not summed: a project image removed alone frees its own layers only, its stack stays.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from ..lock.known import known_projects, last_run, now
from ..lock.lockfile import read_lock

STACK_LABEL = "io.cudabox.stack.hash"
DAY = 86400.0


@dataclass
class ImageInfo:
    image_id: str
    tags: list[str]
    kind: str  # project | stack
    size: int
    created: float
    stack_hash: str
    stack: str  # the stack's one-line label (torch 2.7.1 cu128 ...)
    lock_hash: str | None
    project: str | None
    layers: tuple = ()
    projects: list[str] = field(default_factory=list)  # known project directories that use it
    last_run: float | None = None
    containers: int = 0

    def to_dict(self) -> dict:
        return {"image_id": self.image_id, "tags": self.tags, "kind": self.kind, "size_bytes": self.size,
                "created": self.created, "stack_hash": self.stack_hash, "stack": self.stack,
                "lock_hash": self.lock_hash, "project": self.project, "projects": self.projects,
                "last_run": self.last_run, "containers": self.containers}


@dataclass
class Plan:
    remove: list[ImageInfo]
    keep: list[tuple[ImageInfo, str]]  # (image, why it stays)
    freed: int  # bytes the removals free (layers no remaining image uses)

    def to_dict(self) -> dict:
        return {"remove": [i.to_dict() for i in self.remove],
                "keep": [dict(i.to_dict(), why=why) for i, why in self.keep], "freed_bytes": self.freed}


def _created(text) -> float:
    import datetime

    if isinstance(text, (int, float)):
        return float(text)
    try:  # 2026-11-22T16:54:53.123456789Z: Python parses microseconds only
        head = str(text).split(".")[0].rstrip("Z")
        return datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return 0.0


def describe(label: str) -> str:
    """The io.cudabox.stack label (canonical JSON) in a few words: torch 2.7.1, CUDA 12.8, Python 3.13, slim."""
    import json

    try:
        data = json.loads(label)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    parts = [f"{name} {version.split('+')[0]}" for name, version in (data.get("packages") or {}).items()
             if not name.startswith("nvidia-")]
    parts += [f"CUDA {data.get('cuda')}", f"Python {data.get('python')}", str(data.get("flavour") or "")]
    return ", ".join(p for p in parts if p and not p.endswith("None"))


def inventory(engine) -> tuple[list[ImageInfo], dict]:
    """cudabox's tagged images, with the projects that use them and when they last ran; and every image's
    (size, layers) on the engine, for the freed-space arithmetic."""
    refs: dict[str, list[str]] = {}  # lock hash / stack hash -> project dirs
    for directory in known_projects():
        try:
            lock = read_lock(directory)
        except Exception:  # noqa: BLE001 - an unreadable lock references nothing
            continue
        refs.setdefault(f"lock:{lock.hash}", []).append(str(directory))
        refs.setdefault(f"stack:{lock.stack_hash}", []).append(str(directory))
    users = engine.image_users()
    chains = engine.image_chains()
    ours = []
    for summary in engine.images():
        labels = summary.get("Labels") or {}
        tags = [t for t in summary.get("RepoTags") or () if t != "<none>:<none>"]
        if STACK_LABEL not in labels or not tags or summary["Id"] not in chains:
            continue
        image_id = summary["Id"]
        lock_hash = labels.get("io.cudabox.lock.hash")
        kind = "project" if labels.get("io.cudabox.project") else "stack"
        key = f"lock:{lock_hash}" if kind == "project" else f"stack:{labels[STACK_LABEL]}"
        ours.append(ImageInfo(
            image_id=image_id, tags=sorted(tags), kind=kind, size=chains[image_id][0],
            created=_created(summary.get("Created")), stack_hash=labels[STACK_LABEL],
            stack=describe(labels.get("io.cudabox.stack", "")), lock_hash=lock_hash,
            project=labels.get("io.cudabox.project"), layers=chains[image_id][1],
            projects=sorted(set(refs.get(key, []))), last_run=last_run(image_id), containers=users.get(image_id, 0)))
    ours.sort(key=lambda i: (i.kind != "project", -i.created))
    return ours, chains


def plan(images: list[ImageInfo], chains: dict, *, unused_days: float | None = None, match=(),
         at: float | None = None) -> Plan:
    """What `images prune` removes: cudabox images no known lock references (and, with unused_days, those
    not run, nor built, for that long), never one a container uses or a kept project image is built on.
    `match`: only images with a tag matching one of these globs are considered (the others are kept)."""
    at = now() if at is None else at
    keep, remove = [], []

    def stale(image: ImageInfo) -> bool:
        return unused_days is not None and max(image.last_run or 0, image.created) < at - unused_days * DAY

    def decide(image: ImageInfo, kept_stacks: set) -> str | None:
        if match and not any(fnmatch.fnmatchcase(t, g) for t in image.tags for g in match):
            return "not matched by --match"
        if image.containers:
            return f"used by {image.containers} container(s)"
        if image.kind == "stack" and image.stack_hash in kept_stacks:
            return "a kept project image is built on it"
        if image.projects and not stale(image):
            return f"used by {len(image.projects)} project(s)"
        return None

    kept_stacks: set = set()
    for image in [i for i in images if i.kind == "project"] + [i for i in images if i.kind == "stack"]:
        why = decide(image, kept_stacks)
        if why is None:
            remove.append(image)
        else:
            keep.append((image, why))
            if image.kind == "project":
                kept_stacks.add(image.stack_hash)
    return Plan(remove, keep, freed_bytes(chains, {i.image_id for i in remove}))


def freed_bytes(chains: dict, removed: set) -> int:
    """Bytes freed by removing `removed` from an engine whose images are `chains` (id -> (size, layers)).
    Each image owns the layers past its longest ancestor's (an image whose chain is a prefix of its own);
    those are freed when every image built on them goes too."""
    total = 0
    for image_id in removed:
        size, layers = chains[image_id]
        parents = [chains[o] for o in chains if o != image_id and len(chains[o][1]) < len(layers)
                   and layers[:len(chains[o][1])] == chains[o][1]]
        own = size - max((p[0] for p in parents), default=0)
        users = [o for o in chains if chains[o][1][:len(layers)] == layers]  # itself, same chain, children
        if all(u in removed for u in users):
            # an identical chain (another ID, same layers) counts once
            if min(u for u in users if chains[u][1] == layers) == image_id:
                total += max(own, 0)
    return total


def remove(engine, images: list[ImageInfo]) -> list[tuple[ImageInfo, str | None]]:
    """Remove the images (project images first, then stacks); (image, None) or (image, why it stayed)."""
    out = []
    for image in sorted(images, key=lambda i: i.kind != "project"):
        kept = [tag for tag in image.tags if not engine.remove_image(tag)]
        out.append((image, f"the engine kept {', '.join(kept)} (in use?)" if kept else None))
    return out


def short(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home):] if path.startswith(home + "/") else path
