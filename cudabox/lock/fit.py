"""Does this locked stack run on this driver and these GPUs? Answered from the lock alone.

`stack_runs` is the one answer: `cudabox run`'s preflight, the Kubernetes
affinity, `fleet plan` and the host check all call it (or `gpu_coverage`),
so they can't disagree. It reads `stack.runs_on` (cudabox/resolve/facts.py
wrote it at lock time) and never loads the matrix.

The rules (docs/lock.md): a driver at or above `native_driver` runs the
stack natively (PTX JIT works); a minor-compat stack also runs on drivers
at or above `minor_compat_driver`, SASS only; a forward-compat stack also
runs on the branches its cuda-compat serves, on datacenter GPUs. A GPU is
served when every framework carries SASS for it (same major, minor <= the
GPU's; `a` targets only on exactly their CC), or PTX for an older CC when
the driver can JIT, or (JAX) its documented minimum CC. A plain stack
(code "cuda") serves the GPUs its toolkit compiles for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..errors import InputError
from ..knowledge.arch import ArchList, DriverVersion, cc_tuple, sm_of
from ..resolve.stack import Code, RunFacts, Stack


@dataclass(frozen=True)
class Gpu:
    """A GPU to judge: its name (for messages), compute capability, and class when known."""

    name: str
    cc: str
    datacenter: bool | None = None  # None: unknown (forward compatibility then isn't refused for it)


@dataclass(frozen=True)
class Fit:
    """The verdict: ok, one line saying why (or why not), and the driver mode it runs in."""

    ok: bool
    why: str
    mode: str | None = None  # native | minor-compat | forward-compat

    def __bool__(self) -> bool:
        return self.ok


def facts_of(stack) -> RunFacts:
    """The stack's run facts; a lock written before they existed has none: re-lock."""
    stack = getattr(stack, "stack", stack)  # a Lock or a Stack
    if stack.runs_on is None:
        raise InputError("cudabox.lock predates the driver/GPU facts (runs_on); run `cudabox lock` to refresh it")
    return stack.runs_on


def driver_mode(stack, driver) -> tuple[str | None, str]:
    """(mode, why) for a driver: native, minor-compat or forward-compat; (None, why not)."""
    stack = getattr(stack, "stack", stack)
    facts = facts_of(stack)
    d = driver if isinstance(driver, DriverVersion) else DriverVersion.parse(str(driver))
    native = DriverVersion.parse(facts.native_driver) if facts.native_driver else None
    if native is None or d >= native:
        return "native", (f"driver {d} runs CUDA {stack.cuda} natively"
                          + (f" (>= {native})" if native else " (no known floor)"))
    if facts.minor_compat_driver and d >= DriverVersion.parse(facts.minor_compat_driver):
        return "minor-compat", (f"driver {d} runs CUDA {stack.cuda} under minor-version compatibility "
                                f"(>= {facts.minor_compat_driver}; no PTX JIT)")
    if d.branch in facts.forward_compat_branches:
        return "forward-compat", (f"driver {d} (R{d.branch}) runs CUDA {stack.cuda} through the image's "
                                  "forward-compatibility libraries (datacenter GPUs only)")
    floor = facts.minor_compat_driver or str(native)
    extra = f" or a branch in {', '.join(f'R{b}' for b in facts.forward_compat_branches)}" \
        if facts.forward_compat_branches else ""
    return None, (f"the stack (CUDA {stack.cuda}) needs an NVIDIA driver >= {floor}{extra} "
                  f"({stack.requirement}); driver {d} is older")


def code_for(code: Code, cc: str, *, ptx_jit: bool) -> str | None:
    """How one framework's code serves compute capability `cc` ("sass sm_86", "ptx compute_90"), or None."""
    if code.name == "cuda":  # a plain stack: NVRTC compiles for the toolkit's SASS targets
        return f"compiles {sm_of(cc)}" if sm_of(cc) in code.sass else None
    return ArchList(sass=code.sass, ptx=code.ptx, min_cc=code.min_cc).coverage(cc, ptx_jit=ptx_jit)


def gpu_coverage(stack, cc: str, *, mode: str = "native") -> str | None:
    """How the whole stack serves a GPU of this CC in this driver mode ("torch: sass sm_90, ..."), or None."""
    facts = facts_of(stack)
    jit = mode != "minor-compat"
    hows = []
    for code in facts.code:
        how = code_for(code, cc, ptx_jit=jit)
        if how is None:
            return None
        hows.append(f"{code.name}: {how}")
    return ", ".join(hows) or "no GPU code to check"


def stack_runs(stack, driver=None, gpus: Iterable = ()) -> Fit:
    """Does this stack (a Lock or a Stack) run on this driver (None: not judged) and these GPUs
    (anything with .name and .cc, and optionally .datacenter)? Reads the lock's facts only."""
    stack = getattr(stack, "stack", stack)
    if not isinstance(stack, Stack):
        raise TypeError("stack_runs takes a Lock or a Stack")
    mode, why = ("native", "driver not judged") if driver is None else driver_mode(stack, driver)
    if mode is None:
        return Fit(False, why)
    gpus = list(gpus)
    if mode == "forward-compat":
        consumer = [g for g in gpus if getattr(g, "datacenter", None) is False]
        if consumer:
            return Fit(False, f"{why}; {consumer[0].name} is not a datacenter GPU")
    for g in gpus:
        cc = str(g.cc)
        cc_tuple(cc)  # a malformed CC fails loudly here
        how = gpu_coverage(stack, cc, mode=mode)
        if how is None:
            text = _no_code(stack, g, mode)
            return Fit(False, text)
    return Fit(True, why, mode)


def _no_code(stack: Stack, gpu, mode: str) -> str:
    facts = facts_of(stack)
    cc = str(gpu.cc)
    for code in facts.code:
        if code_for(code, cc, ptx_jit=mode != "minor-compat") is None:
            carries = ArchList(code.sass, code.ptx, code.min_cc).describe() if code.name != "cuda" \
                else f"CUDA {stack.cuda} compiles {' '.join(code.sass)}"
            text = f"{code.name} carries {carries}: no code for {gpu.name} ({sm_of(cc)})"
            if mode == "minor-compat" and code_for(code, cc, ptx_jit=True):
                text += " without PTX JIT, which minor-version compatibility lacks (upgrade the driver)"
            return text
    return f"no code for {gpu.name} ({sm_of(cc)})"


def covered_ccs(stack) -> tuple[list[str], bool]:
    """The known compute capabilities the stack serves on a native driver, and whether PTX keeps
    serving GPUs newer than the newest known one (for the Kubernetes affinity)."""
    facts = facts_of(stack)
    ok = [cc for cc in facts.known_ccs if gpu_coverage(stack, cc) is not None]
    top = facts.known_ccs[-1] if facts.known_ccs else None
    open_above = bool(top and top in ok and facts.code and all(
        (code_for(c, top, ptx_jit=True) or "").startswith(("ptx", "cc")) for c in facts.code))
    return ok, open_above
