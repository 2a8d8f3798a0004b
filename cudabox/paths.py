"""Where cudabox finds its bundled data and keeps user state (XDG directories)."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


BUNDLED = ("matrices", "templates")  # copied into cudabox/_data/ when a wheel is built (setup.py)


def checkout_root() -> Path | None:
    """The cudabox repository this package runs from (an editable install), or None (a wheel, an sdist's
    install): only a checkout has images/ and .github/, the catalog's artefacts."""
    root = _PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "matrices").is_dir() else None


def _bundled(name: str) -> Path:
    """matrices/ and templates/: inside the package in a wheel (cudabox/_data/), at the repository root in a
    checkout. The wheel's copy wins: site-packages/ may hold some other distribution's `templates/`."""
    inside = _PACKAGE / "_data" / name
    if inside.is_dir():
        return inside
    root = checkout_root()
    return (root or _PACKAGE.parent) / name


def matrices_dir() -> Path:
    return Path(os.environ["CUDABOX_BUNDLED_MATRICES"]) if "CUDABOX_BUNDLED_MATRICES" in os.environ \
        else _bundled("matrices")


def templates_dir() -> Path:
    return _bundled("templates")


def smoke_file() -> Path:
    """The in-image smoke test's source (cudabox/image/smoke.py): its hash is part of the stack hash."""
    return _PACKAGE / "image" / "smoke.py"


def repo_root() -> Path:
    """The checkout's root (see checkout_root); outside a checkout, where it would be (for messages)."""
    return checkout_root() or _PACKAGE.parent


def in_checkout(name: str, flag: str) -> Path:
    """A repository artefact (images/, .github/...): InputError (exit 2) naming `flag` outside a checkout."""
    root = checkout_root()
    if root is None:
        from .errors import InputError

        raise InputError(f"{name} belongs to a cudabox checkout, and this cudabox is an installed package: "
                         f"pass {flag}")
    return root / name


def catalog_dir() -> Path:
    """images/: the published image catalog (generated from matrices/catalog.yaml)."""
    return repo_root() / "images"


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "cudabox"


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cudabox"


def state_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "cudabox"
