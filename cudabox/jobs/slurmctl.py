"""The one door to Slurm: sbatch, scontrol, sacct, scancel, srun and enroot run here and nowhere else.

Only Slurm's own commands are used, so this works on any cluster the user
can already submit to. A job's end state comes from `scontrol show job`
(kept for MinJobAge after the end) or, once purged, from `sacct` when
accounting is on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvironmentProblem

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE")
_KV = re.compile(r"\s+(?=[A-Za-z][A-Za-z0-9_/:]*=)")


@dataclass
class JobInfo:
    job_id: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ... or UNKNOWN
    exit_code: str = "0:0"  # Slurm's "code:signal"
    fields: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.state.split()[0] in TERMINAL

    @property
    def exit_status(self) -> int:
        """The process exit status this job stands for: its code, 128+signal, 1 for a failure without one."""
        code, _, signal = self.exit_code.partition(":")
        code, signal = int(code or 0), int(signal or 0)
        if signal:
            return 128 + signal
        if code:
            return code
        return 0 if self.state == "COMPLETED" else 1


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EnvironmentProblem(f"`{name}` not found: this machine is not a Slurm submit host "
                                 "(install the Slurm client, or run where sbatch works)")
    return path


def _run(args: list[str], *, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([_tool(args[0]), *args[1:]], input=input, capture_output=True, text=True)
    if check and proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        raise EnvironmentProblem(f"{args[0]} failed: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc


def has_pyxis() -> bool:
    """pyxis adds --container-image to srun; its --help is the only reliable probe from a login node."""
    try:
        return "--container-image" in _run(["srun", "--help"], check=False).stdout
    except EnvironmentProblem:
        return False


def parse_fields(line: str) -> dict:
    """One `scontrol show ... -o` line -> {key: value} (values may contain spaces)."""
    out = {}
    for part in _KV.split(line.strip()):
        key, _, value = part.partition("=")
        out.setdefault(key, value.strip())
    return out


def submit(script_text: str, *, keep_dir: Path | None = None) -> str:
    """sbatch --parsable, the script on stdin; returns the job id (a copy of the script is kept)."""
    out = _run(["sbatch", "--parsable"], input=script_text).stdout.strip()
    job_id = out.split(";")[0]
    if not job_id.isdigit():
        raise EnvironmentProblem(f"sbatch printed {out!r}, not a job id")
    if keep_dir is not None:
        (Path(keep_dir) / f"cudabox-{job_id}.sh").write_text(script_text, encoding="utf-8")
    return job_id


def job_info(job_id: str) -> JobInfo:
    proc = _run(["scontrol", "show", "job", "-o", job_id], check=False)
    if proc.returncode == 0 and "JobId=" in proc.stdout:
        line = next(ln for ln in proc.stdout.splitlines() if "JobId=" in ln)
        f = parse_fields(line)
        return JobInfo(job_id, f.get("JobState", "UNKNOWN"), f.get("ExitCode", "0:0"), f)
    if shutil.which("sacct"):  # purged from the controller: ask accounting, when it is on
        acct = _run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,ExitCode"], check=False)
        rows = [r.split("|") for r in acct.stdout.splitlines() if "|" in r]
        if acct.returncode == 0 and rows:
            return JobInfo(job_id, rows[0][0].split()[0], rows[0][1])
    return JobInfo(job_id, "UNKNOWN")


def cancel(job_id: str) -> None:
    _run(["scancel", job_id], check=False)


def show_jobs(job_id: str | None = None) -> tuple[int, list[dict], str]:
    """`scontrol show job -o [ID]`: (its exit status, one field dict per job line, its error text)."""
    proc = _run(["scontrol", "show", "job", "-o", *([job_id] if job_id else [])], check=False)
    rows = [parse_fields(line) for line in proc.stdout.splitlines() if "JobId=" in line]
    return proc.returncode, rows, (proc.stdout + proc.stderr)


def enroot_import(image: str, path: Path) -> None:
    """An enroot squashfs of IMAGE from the local engine (pyxis runs it)."""
    _run(["enroot", "import", "-o", str(path), f"dockerd://{image}"])
