"""Build a real torch CUDA stack and print its build time and image size. NOT run in CI.

The project asks for `torch` and nothing else, so the resolver picks PyPI's default torch wheel (and the
NVIDIA CUDA/cuDNN wheels it depends on), with the Python of the slim base image (Debian's, so nothing is
downloaded from GitHub). That is about 3 GB of wheels from PyPI, several minutes on a fast link, and an
image of ~6-8 GB in the engine: run it by hand when you change the build path.

Needs the engine and debian:bookworm-slim (`make services`); the CA bundle as in bench/build.py.
Usage: python bench/torch_stack.py [--no-cache] [--keep]   (--keep: leave the images in the engine)
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

CUDABOX = shutil.which("cudabox", path=str(Path(sys.executable).parent)) or "cudabox"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def main() -> None:
    from cudabox.knowledge import loader as matrix

    m = matrix.load()
    slim = m.slim[0]  # the first slim base (debian:bookworm-slim) and its own Python: no Python download
    python = m.os_info[slim.os].python
    env = dict(os.environ, CUDABOX_NO_HOST="1")
    if not env.get("CUDABOX_CA_CERT") and HOST_CA.exists():
        env["CUDABOX_CA_CERT"] = str(HOST_CA)
    with tempfile.TemporaryDirectory(prefix="cudabox-torch-bench-") as tmp:
        project = Path(tmp) / "torch-bench"
        project.mkdir()
        (project / "cudabox.yaml").write_text(f'name: torch-bench\npython: "{python}"\nrequirements: [torch]\n')
        subprocess.run([CUDABOX, "lock"], cwd=project, env=env, check=True, stdout=subprocess.DEVNULL)
        stack = json.loads((project / "cudabox.lock").read_text())["stack"]
        print(f"stack: {', '.join(f'{k}=={v}' for k, v in stack['packages'].items())}; CUDA {stack['cuda']}, "
              f"Python {stack['python']}, base {stack['base_image']}")
        args = [CUDABOX, "build", "--json"] + (["--no-cache"] if "--no-cache" in sys.argv else [])
        started = time.monotonic()
        proc = subprocess.run(args, cwd=project, env=env, stdout=subprocess.PIPE, text=True)  # progress: stderr
        seconds = time.monotonic() - started
        if proc.returncode != 0:
            sys.exit(f"build failed (exit {proc.returncode}) after {seconds:.0f} s")
        result = json.loads(proc.stdout)
        import docker

        client = docker.from_env()
        size = client.api.inspect_image(result["image_id"])["Size"]
        stack_size = client.api.inspect_image(result["stack"]["image_id"])["Size"]
        reused = " (stack image reused: run with --no-cache for a full build)" if result["stack"]["reused"] else ""
        print(f"torch stack build   {seconds:7.1f} s{reused}")
        print(f"stack image size    {stack_size / 1e9:7.2f} GB  {result['stack']['image']}")
        print(f"project image size  {size / 1e9:7.2f} GB  {result['image']}")
        validation = result.get("validation") or {}
        print(f"smoke test          {validation.get('status', 'not run')}")
        if "--keep" not in sys.argv:
            for ref in (result["image"], result["stack"]["image"]):
                try:
                    client.images.remove(ref)
                except docker.errors.APIError as exc:
                    print(f"kept {ref}: {exc.explanation}")


if __name__ == "__main__":
    main()
