"""The facts a stack needs to judge a driver and GPUs later, taken from the matrix once, at resolution.

Everything after `lock` (run's preflight, the Kubernetes affinity, `fleet plan`,
the host check) reads these values from cudabox.lock instead of reloading the
matrix: the driver floors, each framework's SASS/PTX lists, the compute
capabilities the matrix knew and the GPUs' product names.
"""

from __future__ import annotations

import re

from ..knowledge.matrix import Matrix
from ..knowledge.model import Build, DriverVersion, cuda_version
from .stack import Code, RunFacts, Stack

_BRANCH = re.compile(r"driver>=(\d+),driver<(\d+)")


def native_driver(m: Matrix, minor: str) -> DriverVersion | None:
    """The oldest driver that runs CUDA `minor` natively: its toolkit's GA driver, and a branch whose own
    CUDA is at least `minor` (Matrix.runs_natively, as one version)."""
    tk = m.toolkit(minor)
    floors = [tk.min_driver] if tk and tk.min_driver else []
    branch = next((b.branch for b in m.branches if cuda_version(b.cuda) >= cuda_version(minor)), None)
    if branch is not None:
        floors.append(DriverVersion.parse(str(branch)))
    return max(floors) if floors else None


def product_name(m: Matrix, name: str) -> str:
    """GFD's gpu.product: the nvidia-smi name with spaces as dashes ("NVIDIA-A100-SXM4-80GB")."""
    gpu = m.find_gpu(name)
    smi = next((a for a in (gpu.aliases if gpu else ()) if a.upper().startswith(("NVIDIA", "TESLA"))), name)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", smi).strip("-")[:63]


def run_facts(m: Matrix, stack: Stack, builds: list[Build]) -> RunFacts:
    native = native_driver(m, stack.cuda)
    minor_compat = None
    if stack.driver_mode == "minor-compat":
        major = m.majors.get(int(stack.cuda.split(".")[0]))
        minor_compat = str(major.minor_compat_driver) if major else None
    branches = ()
    if stack.driver_mode == "forward-compat":
        branches = tuple(sorted({int(lo) for lo, hi in _BRANCH.findall(stack.requirement) if int(hi) == int(lo) + 1}))
    if builds:
        code = tuple(Code(b.framework, tuple(b.arch.sass), tuple(b.arch.ptx), b.arch.min_cc) for b in builds)
    else:
        tk = m.toolkit(stack.cuda)
        code = (Code("cuda", tuple(tk.sass) if tk else ()),)
    known = tuple(sorted({g.cc for g in m.gpus}, key=lambda cc: tuple(int(x) for x in cc.split("."))))
    products = tuple((t.gpu, product_name(m, t.gpu)) for t in stack.targets)
    return RunFacts(native_driver=str(native) if native else None, minor_compat_driver=minor_compat,
                    forward_compat_branches=branches, code=code, known_ccs=known, products=products)


def platform_of(m: Matrix, os_id: str, arch: str = "x86_64") -> str | None:
    """uv's --python-platform for an image OS: manylinux_<its glibc>_<arch> (matrices/images.yaml os)."""
    info = m.os_info.get(os_id)
    return f"{arch}-manylinux_{info.glibc.replace('.', '_')}" if info and info.glibc else None


def build_inputs(m: Matrix) -> tuple[dict, dict]:
    """(tools, smoke): the installer version and the smoke test (its source's hash and the pass thresholds).
    They go into the stack hash: a changed uv pin, threshold or smoke.py never reuses a stale stack image."""
    import hashlib

    from .. import paths

    tools = {t.name: t.version for t in m.tools.values()}
    smoke = {"source_sha256": hashlib.sha256(paths.smoke_file().read_bytes()).hexdigest()}
    if m.thresholds is not None:
        smoke.update(gemm_pass=m.thresholds.gemm_pass, bandwidth_pass=m.thresholds.bandwidth_pass)
    return tools, smoke
