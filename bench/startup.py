"""Start-up time of `cudabox --help` / `--version` next to `python -c pass` (issue: the CLI must be fast)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import PY, command_ms, ensure_bytecode  # noqa: E402

print(f"startup  {ensure_bytecode()}")
cudabox = shutil.which("cudabox", path=str(Path(PY).parent)) or "cudabox"
base = command_ms([PY, "-c", "pass"])
help_ms = command_ms([cudabox, "--help"])
version_ms = command_ms([cudabox, "--version"])
run_help_ms = command_ms([cudabox, "run", "--help"])
print(f"startup  python -c pass      {base:7.1f} ms  (medians of 10)")
print(f"startup  cudabox --version   {version_ms:7.1f} ms  ({version_ms / base:.1f}x python)")
print(f"startup  cudabox --help      {help_ms:7.1f} ms  ({help_ms / base:.1f}x python; target <= 2.5x)")
print(f"startup  cudabox run --help  {run_help_ms:7.1f} ms  ({run_help_ms / base:.1f}x python; a command's help "
      "needs typer: no target)")
