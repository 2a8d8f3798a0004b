"""Run an image's smoke test in a container and keep the report, by image, in the user cache dir.

The smoke test itself (cudabox/smoke.py, at /opt/cudabox/smoke.py in every
image) decides pass or fail; this module gets it a GPU when the engine can
give one (else says why and runs the checks that need none), reads its JSON
report, and stores it under `reports/<image id>.json`, so `images ls` shows
each image's last status and `cudabox run` can skip a validation done already.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import __version__, paths
from ..errors import InputError
from ..files import write_atomic

SCHEMA = "cudabox.validation/v1"
SMOKE = "/opt/cudabox/smoke.py"
EXIT_CODES = {"passed": 0, "failed": 1, "passed-without-gpu": 4}
_GPU_REFUSED = ("could not select device driver", "Unknown runtime specified", "nvidia-container-cli",
                "unresolvable CDI devices")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | fail | warn | skip
    detail: str = ""
    ms: float = 0.0


@dataclass(frozen=True)
class Report:
    status: str  # passed | passed-without-gpu | failed
    image: str
    image_id: str
    gpu: bool  # a GPU was passed to the container
    gpu_reason: str | None  # why no GPU work ran (None when it did)
    checks: tuple[Check, ...] = ()
    perf: dict = field(default_factory=dict)
    devices: tuple = ()
    targets: tuple[str, ...] = ()
    extra_targets: tuple[str, ...] = ()  # --target given to validate
    smoke: dict = field(default_factory=dict)  # the smoke test's own report (cudabox.smoke/v1)
    validated_at: str = ""
    path: str | None = None  # where it is stored

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "status": self.status, "exit_code": self.exit_code, "image": self.image,
                "image_id": self.image_id, "gpu": self.gpu, "gpu_reason": self.gpu_reason,
                "targets": list(self.targets), "extra_targets": list(self.extra_targets),
                "checks": [c.__dict__ for c in self.checks], "perf": self.perf, "devices": list(self.devices),
                "validated_at": self.validated_at, "validated_by": f"cudabox {__version__}", "smoke": self.smoke}

    @classmethod
    def from_dict(cls, d: dict, path: str | None = None) -> "Report":
        return cls(status=d["status"], image=d.get("image", ""), image_id=d.get("image_id", ""),
                   gpu=bool(d.get("gpu")), gpu_reason=d.get("gpu_reason"),
                   checks=tuple(Check(**c) for c in d.get("checks", ())), perf=d.get("perf") or {},
                   devices=tuple(d.get("devices", ())), targets=tuple(d.get("targets", ())),
                   extra_targets=tuple(d.get("extra_targets", ())), smoke=d.get("smoke") or {},
                   validated_at=d.get("validated_at", ""), path=path)


# --------------------------------------------------------------------------- storage


def reports_dir() -> Path:
    return paths.cache_dir() / "reports"


def report_path(image_id: str, extra_targets=()) -> Path:
    """Reports by image ID; a validation with extra --target archs is kept apart from the image's own."""
    name = image_id.split(":")[-1]
    if extra_targets:
        name += "+" + "+".join(sorted(extra_targets))
    return reports_dir() / f"{name}.json"


def load_report(image_id: str, extra_targets=()) -> Report | None:
    path = report_path(image_id, extra_targets)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            return None
        return Report.from_dict(data, str(path))
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- running it


def validate_image(image: str, *, engine=None, targets=(), gpu: bool = True, timeout: float = 900,
                   store: bool = True) -> Report:
    """Run the smoke test of IMAGE (a tag or ID) and return (and store) its report."""
    from ..engine import GpuAccess, connect

    engine = engine or connect()
    attrs = engine.image(image)
    if attrs is None:
        raise InputError(f"image {image} not found in the Docker engine; build it with `cudabox build`")
    targets = tuple(targets or ())
    access = engine.gpu_access() if gpu else GpuAccess(None, reason="--no-gpu given")
    result, refused = _run_smoke(engine, image, targets, access, timeout)
    if result is None:  # the engine refused the GPU request: the checks that need none still run
        access = GpuAccess(None, reason=refused)
        result, _ = _run_smoke(engine, image, targets, access, timeout)
    report = _report(image, attrs["Id"], targets, access, *result)
    if store:
        path = report_path(attrs["Id"], targets)
        write_atomic(path, json.dumps(report.to_dict(), indent=2) + "\n")
        report = replace(report, path=str(path))
    return report


def _run_smoke(engine, image, targets, access, timeout):
    """((exit code, stdout, stderr), None), or (None, why) when the engine refused the GPU request."""
    from ..engine import EngineError

    command = ["python", SMOKE, "--json"] + [a for t in targets for a in ("--target", t)]
    if not access.available:
        command.append("--no-gpu")
    try:
        res = engine.run(image, command, gpus=access, timeout=timeout, labels={"io.cudabox.smoke": image})
    except EngineError as exc:
        text = exc.explanation
        if access.available and any(s in text for s in _GPU_REFUSED):
            return None, f"the engine refused the GPU request ({access.how}): {text}"
        raise
    return (res.exit_code, res.stdout, res.stderr), None


def _report(image, image_id, targets, access, code, stdout, stderr) -> Report:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        smoke = json.loads(stdout)
        if not isinstance(smoke, dict) or "status" not in smoke:
            raise ValueError("not a smoke report")
    except ValueError:
        last = " | ".join(line for line in stderr.strip().splitlines()[-3:]) or f"exit code {code}"
        detail = f"no report from {SMOKE} (not a cudabox image, or no python in it?): {last}"
        return Report("failed", image, image_id, access.available, access.reason or None,
                      (Check("smoke", "fail", detail),), extra_targets=targets, validated_at=now)
    checks = []
    for c in smoke.get("checks") or ():
        detail = c.get("detail") or ""
        if c.get("name") == "gpu" and not access.available:
            detail = f"no GPU in the container: {access.reason}"
        checks.append(Check(str(c.get("name")), str(c.get("status")), detail, float(c.get("ms") or 0)))
    status = smoke["status"]
    if status not in ("passed", "passed-without-gpu", "failed"):  # "error": bad expect.json or usage
        checks.append(Check("smoke", "fail", smoke.get("error") or f"smoke test status {status!r}"))
        status = "failed"
    elif smoke.get("error"):
        checks.append(Check("smoke", "fail", smoke["error"]))
    reason = None if status == "passed" else (access.reason or smoke.get("gpu_reason"))
    return Report(status, image, image_id, access.available, reason, tuple(checks), smoke.get("perf") or {},
                  tuple(smoke.get("devices") or ()), tuple(smoke.get("targets") or ()), targets, smoke, now)


# --------------------------------------------------------------------------- showing it


def print_summary(report: Report, console=None) -> None:
    """One screen: a line per check (failures and warnings in full), devices, perf, the result."""
    from rich.console import Console
    from rich.markup import escape

    con = console or Console(highlight=False)
    stack = (report.smoke.get("stack_hash") or "?")[:12]
    con.print(f"[bold]validate {escape(report.image)}[/] ({report.image_id.split(':')[-1][:12]}; stack {stack}, "
              f"Python {report.smoke.get('python', '?')})")
    colour = {"pass": "green", "fail": "red", "warn": "yellow", "skip": "dim"}
    width = max([len(c.name) for c in report.checks] + [8])
    for c in report.checks:
        detail = " ".join(c.detail.split())
        if c.status not in ("fail", "warn") and len(detail) > 100:
            detail = detail[:99] + "…"
        con.print(f"  [{colour.get(c.status, 'white')}]{c.status.upper():4}[/]  {c.name:<{width}}  {escape(detail)}")
    for d in report.devices:
        con.print(f"  GPU {d.get('index')}: {escape(str(d.get('name')))} (compute {d.get('cc')}, "
                  f"{d.get('memory_total_mib')} MiB, driver {d.get('driver')})")
    perf = report.perf or {}
    parts = []
    if perf.get("gemm_tflops") is not None:
        parts.append(f"GEMM {perf['gemm_tflops']:.1f} TFLOPS" + _fraction(perf.get("gemm_fraction"))
                     + (f" ({perf['gemm_method']})" if perf.get("gemm_method") else ""))
    if perf.get("bandwidth_gbs") is not None:
        parts.append(f"bandwidth {perf['bandwidth_gbs']:.0f} GB/s" + _fraction(perf.get("bandwidth_fraction")))
    if parts:
        con.print("  perf: " + " · ".join(parts))
    style = {"passed": "green", "passed-without-gpu": "yellow", "failed": "red"}.get(report.status, "red")
    con.print(f"result: [{style}]{report.status}[/] (exit {report.exit_code})")
    if report.status == "passed-without-gpu" and report.gpu_reason:
        con.print(f"  nothing ran on a GPU: {escape(report.gpu_reason)}")
    if report.path:
        con.print(f"  [dim]report: {escape(report.path)}[/]")


def _fraction(value) -> str:
    return f" = {value * 100:.0f}% of peak" if isinstance(value, (int, float)) else ""
