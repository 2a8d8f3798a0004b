"""Does the locked install cost build time? Measured figures on the local Docker engine:

  lock          `cudabox lock` of examples/saxpy (uv pip compile against PyPI, twice: stack and project)
  cold locked   the stack image built with --no-cache from the lock's pins (`--no-deps --require-hashes`,
                exact file URLs: nothing resolved in the build)
  cold resolved the same stack built with --no-cache the way it was before the lock pinned packages:
                uv resolves the requirements inside the build (first-index)
  code          `cudabox build` after one project source file changed (the stack image is reused)

--no-cache reruns every step, but BuildKit's cache mounts (apt, uv) outlive it and can't be emptied without
pruning every user's: so the two builds run twice, alternating, and the second round (both with warm cache
mounts, the same wheels) is the comparison; the first round is printed too.
Needs the engine and debian:bookworm-slim (`make services`) and PyPI (CA bundle: $CUDABOX_CA_CERT, else
the host's). Usage: python bench/lock_build.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CUDABOX = shutil.which("cudabox", path=str(Path(sys.executable).parent)) or "cudabox"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def cudabox(*args, cwd, env):
    started = time.monotonic()
    proc = subprocess.run([CUDABOX, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cudabox {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.monotonic() - started, proc


def cold_stack(stack, env) -> tuple[float, str]:
    """Build a stack image with --no-cache in its own context; returns (seconds, tag)."""
    from cudabox.image.build import build_stack

    os.environ.update(env)
    started = time.monotonic()
    built = build_stack(stack, no_cache=True, validate=False, progress=False,
                        ca_cert=env.get("CUDABOX_CA_CERT"))
    return time.monotonic() - started, built.tag


def main() -> None:
    from cudabox.engine import connect
    from cudabox.lock.lockfile import read_lock

    env = dict(os.environ, CUDABOX_NO_HOST="1")
    if not env.get("CUDABOX_CA_CERT") and HOST_CA.exists():
        env["CUDABOX_CA_CERT"] = str(HOST_CA)
    engine = connect(None)
    with tempfile.TemporaryDirectory(prefix="cudabox-bench-") as tmp:
        project = Path(tmp) / "saxpy"
        shutil.copytree(REPO / "examples" / "saxpy", project)
        seconds, _ = cudabox("lock", cwd=project, env=env)
        lock = read_lock(project)
        print(f"lock  (uv pip compile, stack + project)      {seconds:6.1f} s  "
              f"({len(lock.stack.pins)} stack packages pinned)")
        unlocked = replace(lock.stack, pins=None)  # another stack hash: its own image, built the old way
        for round_ in (1, 2):
            locked, _ = cold_stack(lock.stack, env)  # the locked stack image stays: it is saxpy's
            resolved, resolved_tag = cold_stack(unlocked, env)
            engine.remove_image(resolved_tag)
            print(f"round {round_}: build cold, locked stack (--no-cache)            {locked:6.1f} s")
            print(f"round {round_}: build cold, resolved in the build (before)       {resolved:6.1f} s")
        verdict = "no slower" if locked <= resolved * 1.1 else "SLOWER"
        print(f"cold build of a locked stack: {locked / resolved:.2f}x the resolving build ({verdict})")
        cudabox("build", "--no-validate", cwd=project, env=env)
        with (project / "saxpy.py").open("a") as fh:
            fh.write(f"# edited by bench/lock_build.py at {time.time()}\n")
        code, proc = cudabox("build", "--no-validate", "--json", cwd=project, env=env)
        result = json.loads(proc.stdout)
        print(f"build after a code change                    {code:6.1f} s  (stack reused: "
              f"{result['stack']['reused']})")
        engine.remove_image(result["image"])


if __name__ == "__main__":
    main()
