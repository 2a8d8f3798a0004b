"""The node check's results: kept per node in the state dir (for `doctor` and `fleet plan`), and shown.

Standard library only, like cudabox.jobs.nodecheck: it runs on bare GPU nodes.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from .. import paths
from ..errors import CudaboxError
from ..files import read_input_text, write_atomic

SCHEMA = "cudabox.check/v1"


def node_name() -> str:
    """The short host name: what Slurm and Kubernetes inventories call the node (CUDABOX_NODE overrides)."""
    return os.environ.get("CUDABOX_NODE") or socket.gethostname().split(".")[0]


def results_dir(override: Path | None = None) -> Path:
    return Path(override) if override else paths.state_dir() / "checks"


def save(report: dict, directory: Path | None = None) -> Path:
    path = results_dir(directory) / f"{report['node']}.json"
    write_atomic(path, json.dumps(report, indent=2) + "\n")
    return path


def load_results(directory: Path | None = None) -> dict[str, dict]:
    """node -> its last report (unreadable or foreign files are left out)."""
    out = {}
    folder = results_dir(directory)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:  # bounded: a shared results folder holds other nodes' (other users') files
            data = json.loads(read_input_text(path))
        except (CudaboxError, ValueError):
            continue
        if isinstance(data, dict) and data.get("schema") == SCHEMA and data.get("node"):
            out[str(data["node"])] = data
    return out


def summary(report: dict) -> str:
    """'passed at 2026-11-22T17:00:00Z (level 2): GEMM 724 TFLOPS (73% of peak), 2982 GB/s'."""
    perf = report.get("perf") or {}
    parts = []
    if perf.get("gemm_tflops") is not None:
        parts.append(f"GEMM {perf['gemm_tflops']:.0f} TFLOPS" + _pct(perf.get("gemm_fraction")))
    if perf.get("bandwidth_gbs") is not None:
        parts.append(f"{perf['bandwidth_gbs']:.0f} GB/s" + _pct(perf.get("bandwidth_fraction")))
    failed = [c["name"] for c in report.get("checks") or () if c.get("status") == "fail"]
    text = f"{report.get('status')} at {report.get('checked_at')} (level {report.get('level')})"
    if failed:
        text += ": failed " + ", ".join(dict.fromkeys(failed))
    elif parts:
        text += ": " + ", ".join(parts)
    return text


def _pct(value) -> str:
    return f" ({value * 100:.0f}% of peak)" if isinstance(value, (int, float)) else ""


def format_text(report: dict) -> str:
    """One screen, no rich: a line per check (failures and warnings in full), GPUs, perf, the result."""
    found = report.get("found") or {}
    runtime = (found.get("cudart") or {}).get("version")
    lines = [f"cudabox check on {report['node']} (level {report.get('level')}; Python {report.get('python')}"
             f"{', CUDA runtime ' + runtime if runtime else ''}; expectations from {report['expectations']})"]
    checks = report.get("checks") or []
    width = max([len(_label(c)) for c in checks] + [8])
    for c in checks:
        detail = " ".join((c.get("detail") or "").split())
        if c["status"] not in ("fail", "warn") and len(detail) > 100:
            detail = detail[:99] + "…"
        lines.append(f"  {c['status'].upper():4}  {_label(c):<{width}}  {detail}")
    for d in report.get("devices") or ():
        lines.append(f"  GPU {d.get('index')}: {d.get('name')} (compute {d.get('cc')}, "
                     f"{d.get('memory_total_mib')} MiB, driver {d.get('driver')})")
    perf = report.get("perf") or {}
    for p in perf.get("per_device") or [dict(perf, device=None)]:
        bits = []
        if p.get("gemm_tflops") is not None:
            bits.append(f"GEMM {p['gemm_tflops']:.1f} TFLOPS{_pct(p.get('gemm_fraction'))}"
                        + (f" [{p['gemm_method']}]" if p.get("gemm_method") else ""))
        if p.get("bandwidth_gbs") is not None:
            bits.append(f"bandwidth {p['bandwidth_gbs']:.0f} GB/s{_pct(p.get('bandwidth_fraction'))}")
        if bits:
            lines.append(f"  perf{'' if p.get('device') is None else ' GPU %s' % p['device']}: " + " · ".join(bits))
    lines.append(f"result: {report['status']} (exit {report['exit_code']}, {report.get('duration_s', 0):.1f} s)")
    if report["status"] == "passed-without-gpu":
        lines.append(f"  nothing ran on a GPU: {report.get('gpu_reason')}")
    if report.get("path"):
        lines.append(f"  kept in {report['path']}")
    return "\n".join(lines)


def _label(c: dict) -> str:
    return c["name"] + (f"[{c['device']}]" if c.get("device") is not None else "")
