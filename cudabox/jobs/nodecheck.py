"""`cudabox check`: the image smoke test run on the node itself, to answer "is this GPU node healthy?".

No container: smoke.py runs in a subprocess of the chosen Python (this one, or `--python`) against the
host's driver and the CUDA libraries that Python finds (NVIDIA's wheels, a system toolkit). A probe
in that Python first says what is there (frameworks, CUDA runtime, driver, GPUs); the expectations
follow from it and the matrix facts (each GPU's datasheet peaks, the driver a CUDA major needs), or
from a lock (`--lock`: can this node run the project's stack?). Each GPU gets its own smoke run, all
GPUs at once.
The report (`cudabox.check/v1`) is kept per node under the state dir for `doctor` and `fleet plan`.

Standard library only at import time: it must run on a bare GPU node (`python -m cudabox check`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import InputError
from .nodefacts import Facts, load_facts
from .noderesults import SCHEMA, node_name, save

EXIT_CODES = {"passed": 0, "failed": 1, "passed-without-gpu": 4}
SMOKE = Path(__file__).resolve().parent.parent / "image" / "smoke.py"  # run, not imported: 1,700 lines
LEVELS = {"1": 1, "2": 2, "3": 3, "quick": 1, "standard": 2, "long": 3}

# The options of `cudabox check`, shared by the typer command and the plain parser used without typer.
HELP = {
    "level": "1|quick: driver, context, a kernel per GPU (seconds); 2|standard (default): + bandwidth "
             "and GEMM against the datasheet; 3|long: + a sustained GEMM watched through NVML.",
    "python": "The Python whose libraries are checked (a venv's bin/python; default: this one).",
    "lock": "Judge the node against the project's cudabox.lock (its driver floor, its GPUs) instead of "
            "what is installed here.",
    "project": "Project directory (holds cudabox.lock, for --lock).",
    "device": "Check only this CUDA device (default: every GPU, all at once).",
    "gpus": "The number of GPUs this node must show (fewer fails the check; for health checks).",
    "duration": "Seconds of the level-3 sustained run.",
    "gemm_size": "GEMM size n (default 8192; 4096 with under 2 GiB free).",
    "target": "Also require this GPU arch of NVRTC (sm_XY or X.Y); repeatable.",
    "results_dir": "Where results are kept, one file per node (default: STATE_DIR/checks; a shared "
                   "directory collects a cluster's).",
    "no_save": "Do not keep the result.",
    "json": "Print the JSON report (cudabox.check/v1) instead of the summary.",
}


@dataclass(frozen=True)
class Options:
    level: int = 2
    python: str | None = None
    lock: bool = False
    project: Path = Path(".")
    device: int | None = None
    gpus: int | None = None
    duration: float = 30.0
    gemm_size: int | None = None
    targets: tuple[str, ...] = ()
    results_dir: Path | None = None
    save: bool = True
    timeout: float = 1800.0


def parse_level(text) -> int:
    value = LEVELS.get(str(text).strip().lower())
    if value is None:
        raise InputError(f"--level {text}: expected 1, 2, 3, quick, standard or long")
    return value


# --------------------------------------------------------------------------- what the node has

_PROBE = r"""
import importlib.metadata as md, importlib.util, json, sys, ctypes
spec = importlib.util.spec_from_file_location("cudabox_smoke", sys.argv[1])
smoke = importlib.util.module_from_spec(spec); spec.loader.exec_module(smoke)
def version(*dists):
    for d in dists:
        try:
            return md.version(d)
        except Exception:
            pass
out = {"python": sys.version.split()[0], "executable": sys.executable, "frameworks": {}}
torch = importlib.util.find_spec("torch") and version("torch")
if torch and "+cpu" not in torch:
    out["frameworks"]["torch"] = torch
jax = importlib.util.find_spec("jax") and version("jax")
if jax and any(version(p % m) for m in (13, 12, 11) for p in ("jax-cuda%d-plugin", "jax-cuda%d-pjrt")):
    out["frameworks"]["jax"] = jax
tf = importlib.util.find_spec("tensorflow") and version("tensorflow", "tf-nightly")
if tf:
    out["frameworks"]["tensorflow"] = tf
try:
    lib, path, others = smoke.load_library("libcudart")
    v = ctypes.c_int()
    if lib.cudaRuntimeGetVersion(ctypes.byref(v)) == 0:
        out["cudart"] = {"version": "%d.%d" % (v.value // 1000, v.value % 1000 // 10), "path": path}
except OSError:
    pass
try:
    n = smoke.Nvrtc()
    out["nvrtc"] = {"version": n.version, "path": n.path}
except OSError:
    pass
try:
    out["devices"], out["driver"], out["gpu_reason"] = smoke.probe_gpus()
except Exception as exc:
    out["devices"], out["driver"], out["gpu_reason"] = [], None, "NVML probe failed: %s" % exc
print(json.dumps(out))
"""


def probe(python: str, timeout: float = 120) -> dict:
    """Frameworks (CUDA builds only), CUDA runtime, NVRTC, driver and GPUs as PYTHON sees them."""
    try:
        proc = subprocess.run([python, "-c", _PROBE, str(SMOKE)], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise InputError(f"--python {python}: no such interpreter") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"--python {python}: the probe did not finish in {timeout:.0f} s") from None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = " | ".join(proc.stderr.strip().splitlines()[-2:]) or f"exit code {proc.returncode}"
        raise InputError(f"--python {python}: cannot run the probe (Python >= 3.8 needed): {last}") from None


def expectations(found: dict, facts: Facts, stack=None) -> dict:
    """expect.json for this node: its GPUs with their datasheet peaks; the installed CUDA frameworks (they
    run the GEMM); the driver the found CUDA runtime needs — or, with a lock, the stack's driver floor."""
    targets = []
    for d in found.get("devices") or ():
        rec = facts.find(d["name"])
        if any(t["gpu"] == d["name"] for t in targets):
            continue
        targets.append({"gpu": d["name"], "cc": d["cc"],
                        "peak_fp16_tflops": rec.peak_fp16_tflops if rec else None,
                        "peak_bandwidth_gbs": rec.peak_bandwidth_gbs if rec else None})
    from ..image import smoke as smoke_mod

    expect = {"schema": smoke_mod.EXPECT_SCHEMA, "targets": targets, "thresholds": facts.thresholds}
    if stack is not None:
        expect.update(stack_hash=stack.hash, min_driver=stack.min_driver if _is_version(stack.min_driver) else None)
        return expect
    expect["frameworks"] = [f for f in smoke_mod.FRAMEWORKS if f in (found.get("frameworks") or {})]
    cudart = (found.get("cudart") or {}).get("version")
    if cudart:
        expect["min_driver"] = facts.minor_compat.get(int(cudart.split(".")[0]))
    return expect


def _is_version(text) -> bool:
    return bool(text) and all(p.isdigit() for p in str(text).split("."))


# --------------------------------------------------------------------------- running it


def check(options: Options) -> dict:
    """Probe, derive the expectations, run smoke.py once per GPU, merge, judge, keep."""
    python = options.python or sys.executable
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    lock = stack = None
    if options.lock:
        from ..lock.lockfile import read_lock

        lock = read_lock(options.project)
        stack = lock.stack
    facts = load_facts(options.project)
    found = probe(python)
    expect = expectations(found, facts, stack)
    devices = found.get("devices") or []
    slots = gpu_slots(len(devices), options.device, os.environ.get("CUDA_VISIBLE_DEVICES"),
                      "CUDA_DEVICE_ORDER" in os.environ)
    with tempfile.TemporaryDirectory(prefix="cudabox-check-") as tmp:
        path = Path(tmp) / "expect.json"
        path.write_text(json.dumps(expect), encoding="utf-8")
        # one process per GPU, all at once (as DCGM runs its GPUs): the node under load, and a quick check of
        # eight GPUs stays within the 60 s Slurm gives a HealthCheckProgram
        with ThreadPoolExecutor(max_workers=len(slots)) as pool:
            runs = list(pool.map(lambda slot: _smoke(python, path, options, *slot), slots))
    report = merge(runs)
    extra = []
    if options.gpus is not None:
        extra.append(_count_check(len(devices), options.gpus, found))
    if lock is not None:
        extra.append(stack_check(options.project, lock, found))
    report["checks"] += extra
    if any(c["status"] == "fail" for c in extra):
        report["status"] = "failed"
    report.update(schema=SCHEMA, exit_code=EXIT_CODES.get(report["status"], 1), node=node_name(),
                  checked_at=started, checked_by=f"cudabox {__version__}", python_path=found.get("executable"),
                  expectations="lock" if lock else "host", lock=str(Path(options.project) / "cudabox.lock") if lock
                  else None, facts=facts.source, found={k: found.get(k) for k in ("frameworks", "cudart", "nvrtc")},
                  expect=expect)
    if options.save:
        report["path"] = str(save(report, options.results_dir))
    return report


def gpu_slots(count: int, device: int | None, visible: str | None, ordered: bool) -> list[tuple]:
    """(label, environment) of each smoke run: one GPU each, made the only one CUDA sees, so that a framework
    that claims memory on every visible GPU (jax preallocates) stays on its own. The GPUs are NVML's (CUDA
    ordered by PCI bus, as NVML is), or the entries of a CUDA_VISIBLE_DEVICES already set (a Slurm job's)."""
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
    else:
        entries = [str(i) for i in range(count)]
    if not entries:  # no GPU, or CUDA_VISIBLE_DEVICES="" : one run, as things are
        return [(0, {})]
    if device is not None:
        if device >= len(entries):
            raise InputError(f"--device {device}: this node has {len(entries)} GPU(s) to check")
        entries = [entries[device]]
    order = {} if ordered else {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return [(int(e) if e.isdigit() else e, dict(order, CUDA_VISIBLE_DEVICES=e)) for e in entries]


def _smoke(python: str, expect_path: Path, options: Options, ordinal, env: dict) -> dict:
    args = [python, str(SMOKE), "--expect", str(expect_path), "--json", "--level", str(options.level),
            "--device", "0", "--duration", str(options.duration)]
    args += ["--gemm-size", str(options.gemm_size)] if options.gemm_size else []
    args += [a for t in options.targets for a in ("--target", t)]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=options.timeout + options.duration,
                              env=dict(os.environ, **env))
    except subprocess.TimeoutExpired:
        return _broken(ordinal, f"smoke.py on device {ordinal} did not finish in {options.timeout:.0f} s")
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        last = " | ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit code {proc.returncode}"
        return _broken(ordinal, f"no report from smoke.py: {last}")
    if report.get("status") == "error":
        raise InputError(f"smoke.py refused the expectations: {report.get('error')}")
    report["device"] = ordinal
    return report


def _broken(ordinal: int, detail: str) -> dict:
    return {"status": "failed", "device": ordinal, "checks": [{"name": "smoke", "status": "fail", "detail": detail,
                                                               "ms": 0.0}], "perf": {}}


def merge(runs: list[dict]) -> dict:
    """One report from one smoke run per GPU: the first run's checks in full, the GPU checks of the others
    (each GPU check names its device); perf of the first GPU on top, every GPU's in perf.per_device."""
    first = dict(runs[0])
    checks = []
    for run in runs:
        for c in run.get("checks") or ():
            if run is runs[0] or c["name"].startswith("gpu") or c["name"] == "smoke":
                checks.append(dict(c, device=run["device"]) if c["name"].startswith("gpu.") else dict(c))
    statuses = [r.get("status") for r in runs]
    status = "failed" if "failed" in statuses else "passed" if "passed" in statuses else "passed-without-gpu"
    perf = dict(first.get("perf") or {})
    if len(runs) > 1:
        perf["per_device"] = [dict(r.get("perf") or {}, device=r["device"]) for r in runs]
    first.update(status=status, checks=checks, perf=perf, devices_checked=[r["device"] for r in runs],
                 duration_s=round(sum(r.get("duration_s") or 0 for r in runs), 3))
    first.pop("device", None)
    return first


def _count_check(seen: int, wanted: int, found: dict) -> dict:
    ok = seen >= wanted
    detail = f"{seen} GPU(s) visible, {wanted} expected"
    if not ok and found.get("gpu_reason"):
        detail += f": {found['gpu_reason']}"
    return {"name": "gpu.count", "status": "pass" if ok else "fail", "detail": detail, "ms": 0.0}


def stack_check(project: Path, lock, found: dict) -> dict:
    """Would the locked stack run on this node's driver and GPUs? The resolver's rules, through `fleet`."""
    from ..errors import CudaboxError
    from ..knowledge.loader import load
    from ..knowledge.model import DriverVersion
    from .fleet import stack_runs
    from .inventory import Node

    devices, driver = found.get("devices") or [], found.get("driver")
    what = f"{lock.project.name}: CUDA {lock.stack.cuda} ({lock.stack.requirement})"
    if not devices or not driver:
        return {"name": "stack", "status": "skip", "ms": 0.0,
                "detail": f"{what}: no GPU here to judge ({found.get('gpu_reason') or 'no driver'})"}
    m = load(project)
    verdicts = []
    for name in dict.fromkeys(d["name"] for d in devices):
        try:
            node = Node(node_name(), m.gpu(name), DriverVersion.parse(driver))
        except (CudaboxError, ValueError) as exc:
            return {"name": "stack", "status": "fail", "ms": 0.0, "detail": f"{what}: {exc}"}
        verdict = stack_runs(m, lock.stack, node)
        if not verdict.ok:
            return {"name": "stack", "status": "fail", "ms": 0.0,
                    "detail": f"{what} does not run on {name} with driver {driver}: {verdict.why}"}
        verdicts.append(f"{name}: {verdict.mode or 'runs'}")
    return {"name": "stack", "status": "pass", "ms": 0.0,
            "detail": f"{what} runs here (driver {driver}; {'; '.join(verdicts)})"}
