"""Fixtures for tests that submit to the real local Slurm cluster (scripts/ensure-slurm.sh starts it).

`slurm_cluster` needs sbatch/scontrol on PATH and a partition with a node that
can take a job. Under `make test` (CUDABOX_REQUIRE_SERVICES=1, CI) a missing or
broken cluster FAILS the tests; elsewhere they are skipped with the reason.
Mark such tests `@pytest.mark.slurm` (and `docker`: their jobs `docker run`).
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from tests.docker_fixtures import _unavailable

USABLE = ("idle", "mixed", "allocated", "completing")


@pytest.fixture(scope="session")
def slurm_cluster() -> dict:
    """{"partition": the default partition, "node": a usable node}."""
    missing = [tool for tool in ("sbatch", "scontrol", "scancel", "sinfo") if shutil.which(tool) is None]
    if missing:
        _unavailable(f"no Slurm client ({', '.join(missing)} not on PATH; scripts/ensure-slurm.sh installs it)")
    deadline = time.monotonic() + 30
    while True:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %P %T"], capture_output=True, text=True)
        rows = [line.split() for line in proc.stdout.splitlines() if len(line.split()) == 3]
        usable = [r for r in rows if r[2].rstrip("*~#!%$@^-") in USABLE]
        if proc.returncode == 0 and usable:
            node, partition, _ = usable[0]
            return {"partition": partition.rstrip("*"), "node": node}
        if time.monotonic() > deadline:
            why = proc.stderr.strip() or f"no node is idle/mixed ({proc.stdout.strip() or 'sinfo printed nothing'})"
            _unavailable(f"the Slurm cluster is not usable: {why}")
        time.sleep(1)


def job_state(job_id: str) -> tuple[str, str]:
    """(JobState, ExitCode) from the controller."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    fields = dict(part.split("=", 1) for part in out.split() if "=" in part)
    return fields.get("JobState", "?"), fields.get("ExitCode", "?")
