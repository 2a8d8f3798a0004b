"""GPU name matching, apart from the matrix so that `cudabox check` can use it with the standard library only."""

from __future__ import annotations

import re


def normalize_gpu_name(name: str) -> str:
    """ "NVIDIA GeForce RTX 2080 Ti" -> "rtx2080ti"; "Tesla V100-SXM2-32GB" -> "v100sxm232gb"."""
    text = str(name).lower()
    text = re.sub(r"\b(nvidia|tesla|geforce)\b", " ", text)
    return re.sub(r"[^a-z0-9]", "", text)
