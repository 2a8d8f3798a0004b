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


def interleaved_ms(commands: dict[str, list[str]], repeat: int = 15, **kw) -> dict[str, float]:
    """Median wall time of each command, run in turn (A B C A B C ...): a machine whose speed drifts slows
    all of them alike, so their ratios hold."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(repeat + 1):
        for name, argv in commands.items():
            t = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
            if round_:  # the first round warms the page cache and the compiled matrix
                times[name].append((time.perf_counter() - t) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def ensure_bytecode() -> str:
    """Compile cudabox's modules first, as installing it does (pip writes .pyc files): in a checkout run with
    PYTHONDONTWRITEBYTECODE=1 (CI, this sandbox) every command would otherwise compile every module it
    imports, every time, and the figures would time the compiler. Returns the line the benches print."""
    import compileall
    import os
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "cudabox"
    compileall.compile_dir(str(package), quiet=1)
    flag = " (PYTHONDONTWRITEBYTECODE=1 is set: without this every run compiled them)" \
        if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    return f"bytecode: cudabox's modules compiled first, as an install does{flag}"


PY = sys.executable
