"""Median time to load and type-check the whole bundled matrix (target: < 150 ms)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import PY, command_ms, median_ms  # noqa: E402

from cudabox.knowledge import loader as matrix  # noqa: E402

m = matrix.load()
in_process = median_ms(matrix.load, repeat=21)
cold = command_ms([PY, "-c", "from cudabox.knowledge.loader import load; load()"], repeat=7)
base = command_ms([PY, "-c", "pass"], repeat=7)
print(f"matrix   {len(m.toolkits)} toolkits, {len(m.gpus)} GPUs, {len(m.builds)} framework builds, "
      f"{len(m.cuda_images)} nvidia/cuda releases")
print(f"matrix   load (in-process, median of 21)   {in_process:7.1f} ms   target < 150 ms")
print(f"matrix   load (fresh process incl. imports) {cold - base:7.1f} ms   (python start-up subtracted)")
