"""Where cudabox finds its bundled data and keeps user state (XDG directories)."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _bundled(name: str) -> Path:
    """matrices/ and templates/ live beside the package in a checkout, inside it in a wheel."""
    for candidate in (_PACKAGE.parent / name, _PACKAGE / "_data" / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE.parent / name


def matrices_dir() -> Path:
    return Path(os.environ["CUDABOX_BUNDLED_MATRICES"]) if "CUDABOX_BUNDLED_MATRICES" in os.environ \
        else _bundled("matrices")


def templates_dir() -> Path:
    return _bundled("templates")


def repo_root() -> Path:
    return _PACKAGE.parent


def catalog_dir() -> Path:
    """images/: the published image catalog (generated from matrices/catalog.yaml)."""
    return repo_root() / "images"


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "cudabox"


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cudabox"


def state_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "cudabox"
