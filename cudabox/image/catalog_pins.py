"""The catalog's packages, locked: every image installs exact files with their sha256, as a project does.

The catalog is generated from the matrix (catalog.py), and its pins from the package indexes, which move
daily: so an image keeps the pins published in images/<path>/stack.json for as long as what they were
resolved from is unchanged, and only new or changed stacks are locked again (`cudabox images generate`, with
the network; `--upgrade` re-pins all). `cudabox images check` reads the published pins and never locks,
so it needs no network. An image whose packages can't be locked where generate runs (its index is out
of reach) is published unpinned: it resolves in its build, and the plan says why.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ..errors import CudaboxError, InputError
from ..files import read_input_text
from ..resolve.stack import Stack

LOCKERS = 4  # uv processes at once: mostly waiting on the index
NOT_LOCKED = "not locked yet: run `cudabox images generate` (it locks with the network)"


def published(root: Path, path: str) -> Stack | None:
    """The stack published at root/path/stack.json, or None (absent, unreadable, another shape)."""
    try:
        return Stack.from_dict(json.loads(read_input_text(Path(root) / path / "stack.json")))
    except (CudaboxError, ValueError, TypeError, KeyError, AttributeError):
        return None


PIN_INPUTS = ("python", "platform", "requirements", "indexes", "index_urls", "tools")


def same_pin_inputs(a: Stack, b: Stack) -> bool:
    """The published pins still fit: what the lock resolved them from (the requirements, their indexes,
    the Python, the platform, the tools) is unchanged. A new smoke test or label leaves them be."""
    return all(getattr(a, key) == getattr(b, key) for key in PIN_INPUTS)


def pin_images(result, root: Path, *, lock: bool, upgrade: bool = False, progress=None) -> list:
    """result.images with their pins (kept or locked anew); records result.unpinned and result.locked."""
    images, todo = list(result.images), []
    for i, image in enumerate(images):
        old = published(root, image.path)
        if old is not None and old.pins is not None and not upgrade and same_pin_inputs(old, image.stack):
            images[i] = replace(image, stack=replace(image.stack, pins=old.pins, tool_pins=old.tool_pins))
        else:
            todo.append((i, old))
    if not lock:
        for i, _ in todo:
            result.unpinned[images[i].path] = NOT_LOCKED
        return images
    if not todo:
        return images
    from ..lock.packages import uv_binary

    uv = uv_binary(images[todo[0][0]].stack.tools.get("uv", ""))
    ca = os.environ.get("CUDABOX_CA_CERT") or None
    done = 0

    def one(item):
        i, old = item
        previous = old.pins if old is not None and old.pins else ()
        return i, _lock_one(images[i].stack, uv, ca, previous, upgrade)

    with ThreadPoolExecutor(max_workers=LOCKERS) as pool:
        for i, (stack, why) in pool.map(one, todo):
            done += 1
            if progress:
                progress(images[i].path, done, len(todo), why)
            if stack is None:
                result.unpinned[images[i].path] = why
            else:
                images[i] = replace(images[i], stack=stack)
                result.locked.append(images[i].path)
    return images


def _lock_one(stack: Stack, uv: str, ca: str | None, previous, upgrade: bool) -> tuple[Stack | None, str]:
    """(the pinned stack, "") or (None, why it can't be pinned here)."""
    from ..lock.packages import CompileFailed, why_not
    from ..lock.resolution import pin_stack

    try:
        return pin_stack(stack, uv=uv, ca_cert=ca, previous=previous, upgrade=upgrade), ""
    except CompileFailed as exc:
        return None, f"uv could not resolve its packages: {why_not(exc)}"
    except InputError:
        raise
    except CudaboxError as exc:  # an index out of reach, the installer missing from the index
        return None, "; ".join([exc.message] + list(getattr(exc, "reasons", ()))[:1])
