"""The PyTorch wheel index (PEP 503 simple pages of download.pytorch.org), read as PEP 427 file names.

`cudabox matrix refresh` learns from it which CUDA variants a torch release has
and which Pythons each variant's Linux x86_64 wheels cover; nothing else on the
page (hashes, other platforms, CPU/ROCm builds) is used.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

PYTORCH_INDEX = "https://download.pytorch.org/whl/torch/"


@dataclass(frozen=True)
class IndexWheel:
    """One wheel of a PEP 503 simple page: what its file name says (PEP 427)."""

    version: str  # "2.4.1" (public part)
    variant: str | None  # the local tag: "cu124", "cpu", "rocm6.1"; None when untagged
    python: str | None  # CPython minor of a cpXY tag ("3.12"); None for py3 / other interpreters
    free_threaded: bool  # a cp313t-style ABI
    platform: str  # "manylinux_2_28_x86_64", "win_amd64", ...

    @property
    def linux_x86_64(self) -> bool:
        return "linux" in self.platform and self.platform.endswith("x86_64")


def pytorch_wheels(html: str, project: str = "torch") -> list[IndexWheel]:
    """Every `project` wheel a PEP 503 simple page links (its anchors' text, else the href's file name)."""
    names = re.findall(r"<a\b[^>]*>\s*([^<\s]+\.whl)\s*</a>", html) or \
        [urllib.parse.unquote(h.rsplit("/", 1)[-1].split("#", 1)[0]) for h in re.findall(r'href="([^"]+\.whl[^"]*)"', html)]
    out = []
    for name in dict.fromkeys(names):
        try:
            dist, version, _, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if dist != canonicalize_name(project):
            continue
        for tag in tags:
            cp = re.fullmatch(r"cp3(\d+)", tag.interpreter)
            out.append(IndexWheel(version=version.public, variant=version.local, platform=tag.platform,
                                  python=f"3.{cp.group(1)}" if cp else None, free_threaded=tag.abi.endswith("t")))
    return out


def pytorch_variants(html: str) -> dict[str, set[str]]:
    """download.pytorch.org/whl/torch/ (PEP 503) -> {version: {cu126, cu130, ...}} of Linux x86_64 wheels."""
    out: dict[str, set[str]] = {}
    for w in pytorch_wheels(html):
        if w.linux_x86_64 and w.variant and re.fullmatch(r"cu\d+", w.variant):
            out.setdefault(w.version, set()).add(w.variant)
    return out


def pytorch_pythons(html: str) -> dict[tuple[str, str], list[str]]:
    """(version, variant) -> the CPython minors its Linux x86_64 wheels carry (free-threaded left out)."""
    out: dict[tuple[str, str], set[str]] = {}
    for w in pytorch_wheels(html):
        if w.linux_x86_64 and w.variant and w.python and not w.free_threaded:
            out.setdefault((w.version, w.variant), set()).add(w.python)
    return {k: sorted(v, key=Version) for k, v in out.items()}


def variant_cuda(name: str) -> str:
    """cu121 -> 12.1, cu130 -> 13.0."""
    digits = name[2:]
    return f"{int(digits[:-1])}.{digits[-1]}"
