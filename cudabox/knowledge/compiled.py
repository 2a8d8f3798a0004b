"""The typed Matrix, compiled once per content: a pickle under the user cache dir, keyed on the bytes of
every matrix file that could be read (bundled and overlays), the cudabox version and the working folder.

Parsing and type-checking ~20 YAML files costs ~150 ms on every command that resolves; unpickling the
result costs ~10 ms. The key is the files' content, not their times: an edited overlay, a refreshed matrix
or another cudabox version is a new key, so a stale Matrix is never served. Errors are never cached (a
broken file fails the same way each time). CUDABOX_NO_MATRIX_CACHE=1 turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Callable

from .. import __version__, paths
from ..errors import CudaboxError
from ..files import read_input

KEEP = 8  # compiled matrices kept (other overlays, other working folders); the oldest go first
_LOADED: dict = {}  # the last Matrix this process loaded, by key: one unpickling per command


def _key(project_dir: Path | None, bundled: Path | None) -> str | None:
    from .overlay import overlay_dirs

    h = hashlib.sha256(f"cudabox {__version__}\0{os.getcwd()}\0{pickle.HIGHEST_PROTOCOL}\0".encode())
    try:
        for i, directory in enumerate([bundled or paths.matrices_dir(), *overlay_dirs(project_dir)]):
            h.update(f"dir {i} {directory}\0".encode())
            for path in sorted(Path(directory).glob("*.yaml")):
                data = read_input(path)  # bounded: an overlay linked to /dev/zero is the loader's error
                h.update(f"{path.name} {len(data)}\0".encode())
                h.update(data)
    except (OSError, CudaboxError):
        return None  # unreadable: let the loader say what is wrong
    return h.hexdigest()


def cached(project_dir: Path | None, bundled: Path | None, compile_: Callable):
    """The Matrix for these files: from the cache when compiled before, else `compile_()` (then cached)."""
    if os.environ.get("CUDABOX_NO_MATRIX_CACHE") not in (None, "", "0"):
        return compile_()
    key = _key(project_dir, bundled)
    if key is None:
        return compile_()
    if key in _LOADED:  # this process read these files already (cudabox.yaml's check, then the resolver)
        return _LOADED[key]
    folder = paths.cache_dir() / "matrix"
    path = folder / f"{key}.pickle"
    try:
        with open(path, "rb") as fh:
            matrix = pickle.load(fh)  # noqa: S301 - the user's own cache, written by this code
        _LOADED.clear()
        _LOADED[key] = matrix
        return matrix
    except FileNotFoundError:
        pass
    except Exception:  # noqa: BLE001 - a truncated or foreign file: compile again, overwrite it
        pass
    matrix = compile_()
    _LOADED.clear()
    _LOADED[key] = matrix
    try:
        from ..files import write_atomic

        write_atomic(path, pickle.dumps(matrix, protocol=pickle.HIGHEST_PROTOCOL), mode=0o600)
        old = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime)[:-KEEP]
        for stale in old:
            stale.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - a read-only or full cache dir: run without the cache
        pass
    return matrix
