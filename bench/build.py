"""Build times of the bundled example (examples/saxpy) on the local Docker engine, as measured figures:

  cold      `cudabox build --no-cache`: every step of the stack and the project again (the uv cache
            mount starts empty too, so the CUDA wheels are downloaded again)
  code      a rebuild after one project source file changed (target: under 10 s)
  nothing   `cudabox build` when nothing changed (the image is reused, no build runs)
  validate  `cudabox validate` (the smoke test in a container)

Needs the engine and debian:bookworm-slim (`make services`). PyPI is reached with the CA bundle of
$CUDABOX_CA_CERT, else the host's /etc/ssl/certs/ca-certificates.crt when it exists.
Usage: python bench/build.py [--warm]   (--warm: skip the cold build)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CUDABOX = shutil.which("cudabox", path=str(Path(sys.executable).parent)) or "cudabox"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def cudabox(*args, cwd, env, ok=(0,)):
    started = time.monotonic()
    proc = subprocess.run([CUDABOX, *args], cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode not in ok:
        sys.exit(f"cudabox {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc


def main() -> None:
    env = dict(os.environ, CUDABOX_NO_HOST="1")
    if not env.get("CUDABOX_CA_CERT") and HOST_CA.exists():
        env["CUDABOX_CA_CERT"] = str(HOST_CA)
    with tempfile.TemporaryDirectory(prefix="cudabox-bench-") as tmp:
        project = Path(tmp) / "saxpy"
        shutil.copytree(REPO / "examples" / "saxpy", project)
        cudabox("lock", cwd=project, env=env)
        if "--warm" not in sys.argv:
            cold, proc = cudabox("build", "--no-cache", "--no-validate", "--json", cwd=project, env=env)
            steps = json.loads(proc.stdout)["steps"]
            print(f"build  cold (--no-cache, stack + project)  {cold:6.1f} s  ({len(steps)} steps)")
        else:
            cudabox("build", "--no-validate", cwd=project, env=env)
        with (project / "saxpy.py").open("a") as fh:
            fh.write(f"# edited by bench/build.py at {time.time()}\n")
        code, proc = cudabox("build", "--no-validate", "--json", cwd=project, env=env)
        result = json.loads(proc.stdout)
        steps = [s for s in result["steps"] if " FROM " not in s["name"]]  # FROM "runs" in no time
        ran = [s["name"] for s in steps if s["status"] == "done"]
        verdict = "ok" if code < 10 else "OVER the 10 s target"
        print(f"build  after a code change                 {code:6.1f} s  ({verdict}; stack reused: "
              f"{result['stack']['reused']}; steps run: {len(ran)} of {len(steps)})")
        same, proc = cudabox("build", "--no-validate", "--json", cwd=project, env=env)
        reused = json.loads(proc.stdout)["reused"]
        print(f"build  nothing changed                     {same:6.1f} s  (reused: {reused})")
        check, proc = cudabox("validate", "--json", cwd=project, env=env, ok=(0, 4))
        print(f"validate (smoke test in a container)        {check:6.1f} s  ({json.loads(proc.stdout)['status']})")


if __name__ == "__main__":
    main()
