"""`cudabox export k8s`: a batch/v1 Job that runs the project's command in its image on a GPU node.

Scheduling follows from the lock's run facts alone (cudabox/lock/fit.py), through the labels NVIDIA GPU Feature
Discovery puts on GPU nodes, so the Job lands only where its stack runs:

* the driver: `nvidia.com/cuda.driver-version.major/minor/revision` at least
  the stack's minimum driver (label values are strings; `Gt` compares them as
  integers, so ">= 570.26" becomes "major > 570, or major 570 and minor > 25");
  forward-compatible stacks also accept the driver branches their
  NVIDIA_REQUIRE_CUDA names (`driver>=535,driver<536`);
* the GPU: `nvidia.com/gpu.compute.major/minor` of the lock's target GPUs, or
  of every GPU the matrix knew at lock time that the stack's code covers; the target GPUs'
  `nvidia.com/gpu.product` names are a preference, not a requirement (an
  A100 PCIe runs what an A100 SXM runs).

Node selector terms are ORed and expressions within a term ANDed, so every
driver term is combined with every GPU term. The pod runs as the image's
non-root `cudabox` user (1000:1000) with no privilege escalation and no
capabilities, and gets a memory-backed /dev/shm (NCCL and data loaders need
more than the runtime's 64 MB). Same lock, same bytes.
"""

from __future__ import annotations

import re

import yaml

from ..errors import InputError
from ..knowledge.model import DriverVersion, cc_tuple
from ..lock.fit import covered_ccs, facts_of
from ..resolve.stack import Stack

LABEL = "nvidia.com/"
DRIVER = LABEL + "cuda.driver-version."
UID = 1000  # the image's `cudabox` user (render.RenderOptions.uid)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$")


def job_name(project: str, lock_hash: str) -> str:
    """cudabox-<project>-<lock hash>: a DNS label (<= 63 chars), stable for a given lock."""
    base = re.sub(r"[^a-z0-9-]+", "-", project.lower()).strip("-")[:40] or "project"
    return f"cudabox-{base}-{lock_hash[:8]}"


def check_name(name: str) -> str:
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise InputError(f"--name: {name!r} is not a valid Job name (lowercase letters, digits and '-', "
                         "at most 63 characters, starting and ending alphanumeric)")
    return name


# --------------------------------------------------------------------------- affinity


def _expr(key: str, op: str, values: list) -> dict:
    return {"key": key, "operator": op, "values": [str(v) for v in values]}


def driver_terms(stack: Stack) -> list[list[dict]]:
    """Alternatives (ORed), each a list of ANDed expressions, that accept the drivers the stack runs on."""
    facts = facts_of(stack)
    floor_text = facts.minor_compat_driver or facts.native_driver
    floor = DriverVersion.parse(floor_text) if floor_text else None
    terms = []
    if floor is not None:
        major, minor, rev = (list(floor.parts) + [0, 0])[:3]
        if minor == 0 and rev == 0:
            terms.append([_expr(DRIVER + "major", "Gt", [major - 1])])
        else:
            terms.append([_expr(DRIVER + "major", "Gt", [major])])
            same = [_expr(DRIVER + "major", "In", [major])]
            if rev == 0:
                terms.append(same + [_expr(DRIVER + "minor", "Gt", [minor - 1])])
            else:
                terms.append(same + [_expr(DRIVER + "minor", "Gt", [minor])])
                terms.append(same + [_expr(DRIVER + "minor", "In", [minor]),
                                     _expr(DRIVER + "revision", "Gt", [rev - 1])])
    if facts.forward_compat_branches:  # these driver branches run the newer CUDA through cuda-compat
        terms.append([_expr(DRIVER + "major", "In", list(facts.forward_compat_branches))])
    return terms


def gpu_terms(stack: Stack) -> list[list[dict]]:
    """Alternatives accepting the compute capabilities the stack must (targets) or can (coverage) run on."""
    facts = facts_of(stack)
    if stack.targets:
        ccs = {cc_tuple(t.cc) for t in stack.targets}
        open_above = None
    else:
        served, above = covered_ccs(stack)
        ccs = {cc_tuple(cc) for cc in served}
        open_above = cc_tuple(facts.known_ccs[-1])[0] if above else None
    by_major: dict[int, set[int]] = {}
    for major, minor in ccs:
        by_major.setdefault(major, set()).add(minor)
    known = {}
    for cc in facts.known_ccs:
        major, minor = cc_tuple(cc)
        known.setdefault(major, set()).add(minor)
    whole = sorted(maj for maj, mins in by_major.items() if not stack.targets and mins >= known.get(maj, set()))
    terms = [[_expr(LABEL + "gpu.compute.major", "In", whole)]] if whole else []
    for major in sorted(set(by_major) - set(whole)):
        terms.append([_expr(LABEL + "gpu.compute.major", "In", [major]),
                      _expr(LABEL + "gpu.compute.minor", "In", sorted(by_major[major]))])
    if open_above is not None:
        terms.append([_expr(LABEL + "gpu.compute.major", "Gt", [open_above])])
    return terms


def affinity(stack: Stack) -> dict:
    """Node affinity from the lock's run facts (cudabox/lock/fit.py); no matrix."""
    drivers = driver_terms(stack) or [[]]
    gpus = gpu_terms(stack)
    if not gpus:
        raise InputError(f"the stack (CUDA {stack.cuda}) carries code for none of the GPUs the matrix knew")
    terms = [{"matchExpressions": d + g} for d in drivers for g in gpus if d + g]
    out = {}
    if terms:
        out["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    names = dict(facts_of(stack).products)
    products = sorted({names.get(t.gpu, t.gpu) for t in stack.targets})
    if products:
        out.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 100, "preference": {"matchExpressions": [_expr(LABEL + "gpu.product", "In", products)]}}]
    return out


# --------------------------------------------------------------------------- the Job


def job(lock, *, image: str, command: list[str], name: str | None = None, gpus: int = 1,
        namespace: str | None = None, shm_size: str | None = None, backoff_limit: int = 0) -> dict:
    """The Job as a dict, keys in the order kubectl prints them."""
    if not command:
        raise InputError("no command: give the command to run after `--` (e.g. -- python train.py)")
    if gpus < 0:
        raise InputError("--gpus: must be >= 0")
    if shm_size is not None and not _QUANTITY.match(shm_size):
        raise InputError(f"--shm-size: {shm_size!r} is not a Kubernetes quantity (e.g. 8Gi)")
    name = check_name(name or job_name(lock.project.name, lock.hash))
    stack = lock.stack
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "cudabox",
              "cudabox.io/stack": stack.hash[:12]}
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": labels,
                "annotations": {"cudabox.io/lock": lock.hash, "cudabox.io/requirement": stack.requirement}}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    container = {
        "name": "main", "image": image, "command": list(command), "workingDir": lock.project.workdir,
        "resources": {"limits": limits} if limits else {},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    shm = {"medium": "Memory", **({"sizeLimit": shm_size} if shm_size else {})}
    pod = {
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        **({"affinity": affinity(stack)} if gpus else {}),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if gpus else [],
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": shm}],
    }
    if not pod["tolerations"]:
        del pod["tolerations"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": backoff_limit, "template": {"metadata": {"labels": labels}, "spec": pod}}}


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):  # shared label dicts stay written out, not &id001 anchors
        return True


def to_yaml(obj: dict) -> str:
    """Deterministic YAML: insertion order kept, no anchors, strings quoted only where YAML needs it."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)
