"""What `cudabox run` adds over `docker run` of the same image (issue 16 target: at most +100 ms).

Both run `true` in the project image of a tiny plain-CUDA project, with the lock
fresh and the image built (the everyday path). Usage: bench/run_overhead.py
[PROJECT_DIR] (default: a scratch project under the user cache dir, built on
first use; needs a Docker engine and the base image).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _timing import PY, ensure_bytecode  # noqa: E402

REPEAT = 15

SPEC = """name: bench-run
python: "3.11"
cuda: "12.8"
"""


def project() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1]).resolve()
    from cudabox.paths import cache_dir

    path = cache_dir() / "bench-run"
    path.mkdir(parents=True, exist_ok=True)
    if not (path / "cudabox.yaml").exists() or (path / "cudabox.yaml").read_text() != SPEC:
        (path / "cudabox.yaml").write_text(SPEC)
    return path


def main() -> int:
    print(f"run  {ensure_bytecode()}")
    os.environ.setdefault("CUDABOX_NO_HOST", "1")
    cudabox = shutil.which("cudabox", path=str(Path(PY).parent)) or "cudabox"
    docker = shutil.which("docker")
    proj = project()
    ca = "/etc/ssl/certs/ca-certificates.crt"
    if os.path.exists(ca):
        os.environ.setdefault("CUDABOX_CA_CERT", ca)
    # first run: locks and builds when needed (not timed)
    first = subprocess.run([cudabox, "run", "-C", str(proj), "--", "true"], capture_output=True, text=True)
    if first.returncode != 0:
        print(f"run_overhead: cudabox run failed (exit {first.returncode}): {first.stderr.strip()[-400:]}")
        return 1
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    tag = project_tag(read_lock(proj), project_dir=proj)
    commands = {
        "docker run --rm IMAGE true": [docker, "run", "--rm", tag, "true"],
        # the same job as cudabox runs it: mounts, user, ipc, init, tmpfs HOME
        "docker run (cudabox's flags) true": [
            docker, "run", "--rm", "--init", "--ipc=host", "-u", f"{os.getuid()}:{os.getgid()}", "-v",
            f"{proj}:/workspace", "-w", "/workspace", "--tmpfs", "/home/cudabox:exec", "-e", "HOME=/home/cudabox",
            tag, "true"],
        "cudabox run -- true": [cudabox, "run", "-C", str(proj), "--", "true"],
    }
    wall = {name: [] for name in commands}
    cpu = {name: [] for name in commands}
    for _ in range(REPEAT):  # interleaved: a busy machine slows all three alike
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall[name].append((time.perf_counter() - t) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
    med = {name: statistics.median(v) for name, v in wall.items()}
    for name in commands:
        print(f"run  {name:36} {med[name]:7.1f} ms wall  {statistics.median(cpu[name]):6.1f} ms client CPU")
    ours, plain, same = med["cudabox run -- true"], med["docker run --rm IMAGE true"], \
        med["docker run (cudabox's flags) true"]
    print(f"run  cudabox run adds {ours - plain:.1f} ms over docker run "
          f"({ours - same:.1f} ms over the same flags; target <= +100 ms; "
          f"median of {REPEAT}, load average {os.getloadavg()[0]:.1f})")
    print(f"run  ratio cudabox run -- true / docker run --rm IMAGE true: {ours / plain:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
