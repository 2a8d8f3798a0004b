"""Prove cudabox's GPU code paths on a real GPU, in one command.

Runs on a machine with an NVIDIA GPU and a Python that has torch (and
optionally jax) with NVIDIA's CUDA wheels; no Docker, no network:

    python3 bench/gpu/proof.py --target-file bench/gpu/h100-target.json --out DIR

It runs cudabox's smoke test on the host (`cudabox/smoke.py` with an expect
file written for this machine's stack) at every level and through every GEMM
path, measures the same things independently with torch (matmul timed with
CUDA events; a device-to-device copy), provokes the failure paths the docs
promise, and writes one JSON file with everything plus a Markdown summary.
The target file carries the GPU's datasheet peaks from matrices/gpus.yaml
(`cudabox matrix gpu H100 --json`), so no figure is typed in here.
"""
import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOKE = os.path.join(ROOT, "cudabox", "smoke.py")
if not os.path.exists(SMOKE):  # after the package split
    SMOKE = os.path.join(ROOT, "cudabox", "image", "smoke.py")


def environment():
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                          "power.limit,ecc.mode.current", "--format=csv,noheader"],
                         stdout=subprocess.PIPE, text=True).stdout.strip()
    wanted = ("torch", "jax", "jaxlib", "cupy", "numpy")
    packages = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in wanted or name.startswith(("nvidia-", "jax-cuda", "cupy")):
            packages[name] = dist.version
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "nvidia_smi": smi,
            "python": sys.version.split()[0], "platform": platform.platform(),
            "packages": dict(sorted(packages.items()))}


def host_detection():
    """cudabox's own host detection (what `cudabox run`/`doctor` see)."""
    sys.path.insert(0, ROOT)
    try:
        try:
            from cudabox import host
        except ImportError:
            from cudabox.jobs import host  # after the package split
        found = host.detect()
        return {"driver": found.driver, "source": found.source,
                "gpus": [vars(g) if hasattr(g, "__dict__") else g.__repr__() for g in found.gpus],
                "describe": found.describe()}
    except Exception as exc:  # report, don't stop the proof
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def stack_expect(target):
    import torch
    number = torch.backends.cudnn.version()
    cudnn = "%d.%d.%d" % (number // 10000, number % 10000 // 100, number % 100) \
        if number >= 90000 else "%d.%d.%d" % (number // 1000, number % 1000 // 100, number % 100)
    return {"schema": "cudabox.expect/v1", "stack_hash": "host-proof",
            "python": "%d.%d" % sys.version_info[:2], "cuda": torch.version.cuda, "cudnn": cudnn,
            "packages": {"torch": torch.__version__.split("+")[0]}, "frameworks": ["torch"],
            "targets": [{k: v for k, v in target.items() if not k.startswith("_")}],
            "thresholds": {"gemm_pass": 0.5, "bandwidth_pass": 0.6}}


def smoke(workdir, name, expect, args=(), python=(sys.executable,), env=None):
    path = os.path.join(workdir, name + ".expect.json")
    with open(path, "w") as handle:
        json.dump(expect, handle)
    begin = time.time()
    proc = subprocess.run(list(python) + [SMOKE, "--expect", path, "--json"] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, **(env or {})), timeout=600)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"unparsable_stdout": proc.stdout[-2000:]}
    return {"name": name, "args": list(args), "exit": proc.returncode, "wall_s": round(time.time() - begin, 1),
            "report": report, "stderr_tail": proc.stderr[-1500:]}


def independent():
    """torch's own figures: bf16 8192^3 matmul on random data, timed with CUDA
    events, and a 256 MiB device-to-device copy (bytes read + written).

    Each is taken over a 0.3 s window after 3 s of idle (what smoke level 2
    does) and over 1 s windows back to back (the steady state a level-3 run
    sees): an H100 at its 700 W cap lowers its clocks within a second."""
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    x = torch.empty(256 * 2**20 // 4, device="cuda")
    y = torch.empty_like(x)

    def timed(step, iterations):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def rate(step, work, seconds, repeats):
        timed(step, 2)
        per = timed(step, 3) / 3
        iterations = max(3, int(seconds * 1e3 / per))
        return [round(work * iterations / (timed(step, iterations) / 1e3), 1) for _ in range(repeats)]

    out = {}
    for window, repeats in ((0.3, 1), (1.0, 3)):
        time.sleep(3)
        out["torch_matmul_bf16_8192_tflops_%.1fs" % window] = rate(
            lambda: torch.matmul(a, b), 2 * n ** 3 / 1e12, window, repeats)
        time.sleep(3)
        out["torch_d2d_copy_256mib_gbs_%.1fs" % window] = rate(
            lambda: y.copy_(x), 2 * x.numel() * 4 / 1e9, window, repeats)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-file", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--duration", type=float, default=30.0, help="level-3 sustained run")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="cudabox-proof-")  # the expect files: not results
    os.makedirs(workdir, exist_ok=True)
    target = json.load(open(args.target_file))
    expect = stack_expect(target)
    jax_expect = dict(expect, frameworks=["jax"], packages={}, cudnn=None)
    cublas_expect = dict(expect, frameworks=[], packages={})
    measured = independent()
    runs = [
        smoke(workdir, "level1-torch", expect, ["--level", "1"]),
        smoke(workdir, "level2-torch", expect),
        smoke(workdir, "level2-jax", jax_expect),
        smoke(workdir, "level2-cublas", cublas_expect),
        smoke(workdir, "level3-torch", expect, ["--level", "3", "--duration", str(args.duration)]),
        # failure paths
        smoke(workdir, "fail-target-sm70", expect, ["--target", "sm_70", "--level", "1"]),
        smoke(workdir, "fail-newer-driver", dict(expect, min_driver="999.0"), ["--level", "1"]),
        smoke(workdir, "fail-no-visible-device", expect, ["--level", "1"],
              env={"CUDA_VISIBLE_DEVICES": ""}),
        smoke(workdir, "fail-missing-framework", dict(expect, frameworks=["torch", "tensorflow"]),
              ["--level", "1"]),
    ]
    hide = ["/lib/x86_64-linux-gnu/libcudnn.so.9"]
    site = [p for p in sys.path if p.endswith("site-packages")]
    hide += [os.path.join(s, "nvidia", "cudnn") for s in site if os.path.isdir(os.path.join(s, "nvidia", "cudnn"))]
    mounts = " && ".join("mount --bind %s %s" % ("/tmp/cudabox-empty" if os.path.isdir(h) else "/dev/null", h)
                         for h in hide if os.path.exists(h))
    os.makedirs("/tmp/cudabox-empty", exist_ok=True)
    runs.append(smoke(workdir, "fail-missing-cudnn", expect, ["--level", "1"],
                      python=("unshare", "-m", "sh", "-c", mounts + ' && exec "$0" "$@"', sys.executable)))
    result = {"schema": "cudabox.gpu-proof/v1", "environment": environment(),
              "host_detection": host_detection(), "target": target,
              "independent": measured, "runs": runs}
    by = {r["name"]: r["report"] for r in runs}
    ind = result["independent"]
    burst_mm, burst_cp = ind["torch_matmul_bf16_8192_tflops_0.3s"][0], ind["torch_d2d_copy_256mib_gbs_0.3s"][0]
    steady_mm = sorted(ind["torch_matmul_bf16_8192_tflops_1.0s"])[1]

    def ratio(value, reference):
        return round(value / reference, 3) if value and reference else None

    result["comparison"] = {
        name: {"gemm_tflops": p.get("gemm_tflops"), "gemm_vs_torch_0.3s": ratio(p.get("gemm_tflops"), burst_mm),
               "bandwidth_gbs": p.get("bandwidth_gbs"),
               "bandwidth_vs_torch_copy": ratio(p.get("bandwidth_gbs"), burst_cp),
               "gemm_fraction_of_peak": p.get("gemm_fraction"),
               "bandwidth_fraction_of_peak": p.get("bandwidth_fraction")}
        for name, p in ((n, by[n].get("perf") or {}) for n in by if n.startswith("level2"))}
    sustained = (by["level3-torch"].get("perf") or {}).get("sustained") or {}
    if sustained:
        result["comparison"]["level3-torch sustained median"] = {
            "gemm_tflops": sustained["tflops"]["median"],
            "gemm_vs_torch_1.0s": ratio(sustained["tflops"]["median"], steady_mm)}
    stamp = time.strftime("%Y-%m-%d")
    with open(os.path.join(args.out, "gpu-proof-%s.json" % stamp), "w") as handle:
        json.dump(result, handle, indent=1)
    lines = ["# GPU proof, %s" % result["environment"]["date"], "",
             "- GPU / driver: %s" % result["environment"]["nvidia_smi"],
             "- Python %s; %s" % (result["environment"]["python"],
                                  ", ".join("%s %s" % kv for kv in result["environment"]["packages"].items()
                                            if kv[0] in ("torch", "jax", "jaxlib", "cupy"))),
             "- independent (torch, CUDA events): %s" % json.dumps(ind), "",
             "| run | exit | status | checks (non-pass) | perf |", "|---|---|---|---|---|"]
    for run in runs:
        rep = run["report"]
        odd = ["%s=%s" % (c["name"], c["status"]) for c in rep.get("checks", []) if c["status"] != "pass"]
        p = rep.get("perf") or {}
        lines.append("| %s | %s | %s | %s | %s |" % (run["name"], run["exit"], rep.get("status"),
                                                     ", ".join(odd), json.dumps({k: v for k, v in p.items()
                                                                               if k != "sustained"})))
    lines += ["", "comparison: `%s`" % json.dumps(result["comparison"])]
    with open(os.path.join(args.out, "gpu-proof-%s.md" % stamp), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
