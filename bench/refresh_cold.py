"""Wall time of a cold `cudabox matrix refresh --dry-run` (empty HTTP cache) against live PyPI (target: < 30 s).

Needs PyPI. Prints the measured figures, then what a cold plan asks of the network (requests by kind,
bytes received: run in-process through a counting transport); no assertion (performance claims live
here, not in timed tests).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cudabox"]
sys.path.insert(0, str(ROOT))

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

from cudabox.knowledge.pypi import Client, HTTPTransport  # noqa: E402
from cudabox.knowledge.refresh.write import run  # noqa: E402


class Counting(HTTPTransport):
    def __init__(self):
        super().__init__()
        self.kinds, self.bytes, self.lock = collections.Counter(), 0, threading.Lock()

    def get(self, url, headers=None, *, quick=False):
        response = super().get(url, headers, quick=quick)
        kind = ("range" if "Range" in (headers or {}) else ".metadata" if url.endswith(".metadata")
                else "json" if url.endswith("/json") else "other")
        with self.lock:
            self.kinds[f"{kind} {response.status}"] += 1
            self.bytes += len(response.body)
        return response


with tempfile.TemporaryDirectory() as cache:
    transport = Counting()
    start = time.monotonic()
    run(Client(transport, cache_dir=Path(cache)), None, into=ROOT / "matrices", dry_run=True)
    took = time.monotonic() - start
    transport.close()
kinds = ", ".join(f"{k}: {n}" for k, n in sorted(transport.kinds.items()))
print(f"refresh  cold plan in-process               {took:6.1f} s   {sum(transport.kinds.values())} requests "
      f"({kinds}), {transport.bytes / 1e6:.1f} MB received")
