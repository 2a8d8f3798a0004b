"""Helpers shared by tests (fixtures are in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CUDABOX = Path(sys.executable).with_name("cudabox")


def run_cli(*args, cwd=None, env=None, check=None, input=None, timeout=120):
    """Run the real `cudabox` console script; returns CompletedProcess (text)."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([str(CUDABOX), *map(str, args)], cwd=cwd, env=full_env, capture_output=True, text=True,
                          input=input, timeout=timeout)
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc
