"""What runs the node check on a cluster's GPU nodes: a Slurm health-check script and a Kubernetes Job.

* Slurm (`export slurm-healthcheck`): a script for HealthCheckProgram or Prolog that runs
  `cudabox check`, drains a node that fails it with the reason, and resumes a node it drained itself
  once it passes (templates/slurm-healthcheck.sh.j2).
* Kubernetes (`export k8s-check`): an Indexed Job, one pod per GPU node (required pod anti-affinity on
  the hostname), each running the project image's smoke test at the quick level on the GPUs it asks
  for. A Job, not a DaemonSet: a DaemonSet's pod would hold a GPU on every node for as long as it
  lives. `backoffLimitPerIndex: 0` keeps one failing node from stopping the others.
"""

from __future__ import annotations

import shlex
import sys

from .. import paths
from ..errors import InputError
from .k8s import check_name, job, job_name

SMOKE = "/opt/cudabox/smoke.py"


def slurm_script(*, level: int = 1, python: str | None = None, check_python: str | None = None,
                 gpus: int | None = None, results_dir: str | None = None) -> str:
    """The script. PYTHON runs cudabox on the nodes (default: this one); CHECK_PYTHON is the Python whose
    CUDA libraries are checked (`check --python`); GPUS fixes the count the node must show (default: Gres)."""
    import jinja2

    if level not in (1, 2, 3):
        raise InputError(f"--level {level}: expected 1, 2 or 3")
    if gpus is not None and gpus < 0:
        raise InputError("--gpus: must be >= 0")
    args = []
    if check_python:
        args += ["--python", check_python]
    if results_dir:
        args += ["--results-dir", results_dir]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.templates_dir())),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, autoescape=False)
    env.filters["sh"] = lambda value: shlex.quote(str(value))
    return env.get_template("slurm-healthcheck.sh.j2").render(
        level=level, python=python or sys.executable, check_args=args, gpus=gpus)


def k8s_check_job(lock, *, image: str, nodes: int = 1, gpus: int = 1, level: int = 1, name: str | None = None,
                  namespace: str | None = None) -> dict:
    """An Indexed Job: NODES pods, at most one per node, each checking GPUS GPUs of its node."""
    if nodes < 1:
        raise InputError("--nodes: must be >= 1")
    if gpus < 1:
        raise InputError("--gpus: a GPU check needs at least 1 GPU per pod")
    if level not in (1, 2, 3):
        raise InputError(f"--level {level}: expected 1, 2 or 3")
    name = check_name(name or job_name(f"check-{lock.project.name}", lock.hash))
    smoke = f"python {SMOKE} --json --level {level}"
    if gpus == 1:
        command = ["python", SMOKE, "--json", "--level", str(level)]
    else:  # every GPU of the pod, one after the other; any failure fails the pod
        command = ["sh", "-c", f"rc=0; for d in $(seq 0 {gpus - 1}); do {smoke} --device $d; r=$?; "
                               "[ $r -eq 1 ] && failed=1; [ $r -eq 0 ] || rc=$r; done; "
                               "[ -n \"$failed\" ] && exit 1; exit $rc"]
    manifest = job(lock, image=image, command=command, name=name, gpus=gpus, namespace=namespace)
    labels = manifest["metadata"]["labels"]
    labels["cudabox.io/check"] = "quick" if level == 1 else f"level-{level}"
    spec = manifest["spec"]
    del spec["backoffLimit"]
    manifest["spec"] = {"completions": nodes, "parallelism": nodes, "completionMode": "Indexed",
                        "backoffLimitPerIndex": 0, "ttlSecondsAfterFinished": 86400, **spec}
    pod = spec["template"]["spec"]
    pod["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}}, "topologyKey": "kubernetes.io/hostname"}]}
    pod["affinity"].setdefault("nodeAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{"matchExpressions": []}]})
    for term in pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
        term.setdefault("matchExpressions", []).insert(0, {"key": "nvidia.com/gpu.present", "operator": "In",
                                                           "values": ["true"]})
    pod["containers"][0]["name"] = "check"
    return manifest
