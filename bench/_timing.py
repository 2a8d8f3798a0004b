"""Small helpers shared by the bench scripts: medians of repeated runs."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def median_ms(fn, repeat: int = 15) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def command_ms(argv: list[str], repeat: int = 10, **kw) -> float:
    def run():
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)

    run()  # warm the page cache
    return median_ms(run, repeat)


PY = sys.executable
