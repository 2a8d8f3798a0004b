"""Median in-process resolve time over the whole matrix (target < 50 ms) and `cudabox resolve --json` end to end
(target < 100 ms). `--against REV` also times the same command from a git revision of cudabox (e.g. the
code before issue 16's speed work: `--against b15afec^1`), both run the same way, interleaved: a ratio that
holds on a machine whose speed drifts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import PY, ensure_bytecode, interleaved_ms, median_ms  # noqa: E402

from cudabox.knowledge import loader as matrix  # noqa: E402
from cudabox.errors import Unsatisfiable  # noqa: E402
from cudabox.knowledge.model import DriverVersion  # noqa: E402
from cudabox.resolve.request import Request  # noqa: E402
from cudabox.resolve.resolver import resolve  # noqa: E402

m = matrix.load()
CASES = {
    "torch (newest, no constraint)": Request(requirements=("torch",)),
    "torch + torchvision, A100 + RTX 4090, driver 535": Request(
        requirements=("torch", "torchvision"), gpus=(m.gpu("A100"), m.gpu("RTX 4090")),
        driver=DriverVersion.parse("535.104.05")),
    "torch + jax (one environment)": Request(requirements=("torch", "jax")),
    "tensorflow + torch + jax": Request(requirements=("tensorflow", "torch", "jax")),
    "unsatisfiable: torch 2.3 + jax >= 0.4.30 (with ways out)": Request(
        requirements=("torch==2.3.*", "jax>=0.4.30")),
}
for label, request in CASES.items():
    def run(request=request):
        try:
            resolve(m, request)
        except Unsatisfiable:
            pass
    print(f"resolve  {label:58s} {median_ms(run, repeat=21):7.1f} ms   target < 50 ms")

print(f"resolve  {ensure_bytecode()}")
cudabox = shutil.which("cudabox", path=str(Path(PY).parent)) or "cudabox"
env = dict(os.environ, CUDABOX_NO_HOST="1")
query = ["resolve", "--with", "torch", "--gpu", "A100", "--json"]
ms = interleaved_ms({"plain": [cudabox, *query],
                     "typer": [cudabox, "resolve", "-wtorch", *query[3:]],  # -wtorch: a form only typer parses
                     "python": [PY, "-c", "pass"]}, repeat=21, env=env)
print(f"resolve  `cudabox {' '.join(query)}` end to end {ms['plain']:7.1f} ms   target < 100 ms "
      f"(median of 21, runs interleaved, compiled matrix cached; python -c pass {ms['python']:.1f} ms: "
      f"ratio {ms['plain'] / ms['python']:.1f}x)")
print(f"resolve  the same query parsed by typer (`-wtorch`)            {ms['typer']:7.1f} ms   "
      f"(the plain path without typer: {ms['plain'] / ms['typer']:.2f}x of it)")

if "--against" in sys.argv:
    rev = sys.argv[sys.argv.index("--against") + 1]
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(old), rev], check=True,
                       capture_output=True)
        try:
            import compileall

            compileall.compile_dir(str(old / "cudabox"), quiet=1)
            launch = [PY, "-m", "cudabox", *query]  # each tree first on the path: the same launcher for both
            ms = interleaved_ms({"new": ["env", f"PYTHONPATH={root}", *launch],
                                 "old": ["env", f"PYTHONPATH={old}", *launch]}, repeat=21, env=env, cwd=tmp)
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(old)], check=False,
                           capture_output=True)
    print(f"resolve  the same query, this tree vs {rev}: {ms['new']:.1f} ms vs {ms['old']:.1f} ms "
          f"(ratio {ms['new'] / ms['old']:.2f}; median of 21, interleaved)")
