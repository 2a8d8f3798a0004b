"""Wall time of a cold `cudabox matrix refresh --dry-run` (empty HTTP cache) against live PyPI (target: < 30 s).

Needs PyPI. Prints the measured figure; no assertion (performance claims live here, not in timed tests).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cudabox"]

with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    start = time.monotonic()
    proc = subprocess.run([*CLI, "matrix", "refresh", "--dry-run", "--into", str(ROOT / "matrices")],
                          env=env, capture_output=True, text=True, cwd=ROOT)
    cold = time.monotonic() - start
    start = time.monotonic()
    subprocess.run([*CLI, "matrix", "refresh", "--dry-run", "--into", str(ROOT / "matrices")],
                   env=env, capture_output=True, text=True, cwd=ROOT)
    warm = time.monotonic() - start
last = (proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines() or ["(no output)"])[-1]
print(f"refresh  cold --dry-run (empty HTTP cache)  {cold:6.1f} s   target < 30 s   exit {proc.returncode}: {last}")
print(f"refresh  warm --dry-run (cache revalidated)  {warm:6.1f} s")
