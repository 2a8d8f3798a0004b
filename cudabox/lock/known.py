"""What this machine knows about its cudabox projects: which directories hold a lock (so `cudabox images`
can say which projects use an image and `images prune` keeps those), and when each image last ran.

One small file per project and per image under the XDG state dir: concurrent cudabox processes never
rewrite each other's entries, and a lost entry costs only a report line.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .. import paths
from ..files import write_atomic


def _dir(kind: str) -> Path:
    return paths.state_dir() / kind


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def remember_project(directory: Path) -> None:
    """Record a project directory (when its lock is written, built or run). Never fails the command."""
    where = str(Path(directory).resolve())
    try:
        path = _dir("projects") / f"{_key(where)}.json"
        if not path.is_file():
            write_atomic(path, json.dumps({"dir": where}) + "\n")
    except OSError:
        pass


def known_projects() -> list[Path]:
    """Recorded project directories that still hold a cudabox.lock (moved or deleted ones drop out)."""
    out = []
    for path in sorted(_dir("projects").glob("*.json")):
        try:
            directory = Path(json.loads(path.read_text(encoding="utf-8"))["dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if (directory / "cudabox.lock").is_file():
            out.append(directory)
        elif not directory.exists():  # the project is gone for good: forget it
            path.unlink(missing_ok=True)
    return sorted(out)


def mark_run(image_id: str) -> None:
    """`cudabox run` started a job from this image now."""
    try:
        path = _dir("runs") / _key(image_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path)
    except OSError:
        pass


def last_run(image_id: str) -> float | None:
    try:
        return (_dir("runs") / _key(image_id)).stat().st_mtime
    except OSError:
        return None


def now() -> float:
    return time.time()
