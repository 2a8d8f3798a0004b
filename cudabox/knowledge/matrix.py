"""The compatibility matrix as one typed, indexed `Matrix`: what the resolver and the reports query.

`loader.load` builds it from the YAML (docs/matrices.md).
Cross-file consistency (each pin points at a known cuDNN, ...) is
`knowledge.check`'s job.
"""


from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..errors import InputError
from .frameworks import Frameworks
from .names import normalize_gpu_name
from .model import (
    GPU,
    Build,
    Companion,
    CudaImage,
    CudaMajor,
    CudnnBuild,
    CudnnSeries,
    DriverBranch,
    DriverVersion,
    FrameworkRelease,
    Library,
    OSInfo,
    Provenance,
    SlimBase,
    Source,
    Thresholds,
    Tool,
    Toolkit,
    cuda_version,
)


@dataclass
class Matrix:
    """Every fact cudabox knows, typed and indexed."""

    sources: dict[str, Source] = field(default_factory=dict)
    frameworks: Frameworks = field(default_factory=Frameworks)  # frameworks.yaml, in order
    majors: dict[int, CudaMajor] = field(default_factory=dict)
    toolkits: list[Toolkit] = field(default_factory=list)  # oldest first
    libraries: dict[str, Library] = field(default_factory=dict)  # soname -> toolkits that ship it
    branches: list[DriverBranch] = field(default_factory=list)  # oldest first
    gpus: list[GPU] = field(default_factory=list)
    thresholds: Thresholds | None = None
    cudnn: list[CudnnSeries] = field(default_factory=list)
    releases: list[FrameworkRelease] = field(default_factory=list)
    builds: list[Build] = field(default_factory=list)  # newest version first within a framework
    companions: list[Companion] = field(default_factory=list)
    os_info: dict[str, OSInfo] = field(default_factory=dict)
    slim: list[SlimBase] = field(default_factory=list)
    cuda_images: list[CudaImage] = field(default_factory=list)  # oldest first
    tools: dict[str, Tool] = field(default_factory=dict)  # build tools pinned for image builds (uv)

    # ---- CUDA and drivers

    def toolkit(self, minor: str) -> Toolkit | None:
        return self._toolkits.get(minor)

    @cached_property
    def _toolkits(self) -> dict[str, Toolkit]:
        return {t.version: t for t in self.toolkits}

    def driver_cuda(self, driver: DriverVersion) -> str | None:
        """The CUDA version a driver runs natively (what nvidia-smi prints), from its branch."""
        best = None
        for b in self.branches:
            if b.branch <= driver.branch:
                best = b
        return best.cuda if best else None

    def runs_natively(self, driver: DriverVersion, minor: str) -> bool:
        """Driver's own CUDA >= minor, and at least the toolkit's GA driver when known."""
        native = self.driver_cuda(driver)
        if native is None or cuda_version(native) < cuda_version(minor):
            return False
        tk = self.toolkit(minor)
        floor = tk.min_driver if tk else None
        return floor is None or driver >= floor

    def minor_compatible(self, driver: DriverVersion, minor: str) -> bool:
        """Minor-version compatibility: any driver >= the major's floor runs any X.y (limited: no PTX JIT)."""
        major = self.majors.get(int(minor.split(".")[0]))
        return major is not None and driver >= major.minor_compat_driver

    # ---- GPUs

    @cached_property
    def _gpu_index(self) -> dict[str, GPU]:
        index = {}
        for gpu in self.gpus:
            for name in (gpu.name, *gpu.aliases):
                index.setdefault(normalize_gpu_name(name), gpu)
        return index

    def find_gpu(self, name: str) -> GPU | None:
        return self._gpu_index.get(normalize_gpu_name(name))

    def gpu(self, name: str, *, where: str = "GPU") -> GPU:
        """Resolve a GPU name, alias, `sm_89` or `8.9`; unknown -> InputError with close matches."""
        text = str(name).strip()
        found = self.find_gpu(text)
        if found:
            return found
        cc = _cc_from_text(text)
        if cc:
            same = [g for g in self.gpus if g.cc == cc]
            return GPU(
                name=f"compute capability {cc}", cc=cc, arch=same[0].arch if same else "unknown",
                gpu_class="unknown", memory_gb=None, peak_fp16_tflops=None, peak_bandwidth_gbs=None,
                aliases=(), prov=Provenance(source=("user input",)),
            )
        keys = list(self._gpu_index)
        import difflib  # only for a name it does not know

        close = difflib.get_close_matches(normalize_gpu_name(text), keys, n=3, cutoff=0.5)
        names = []
        for key in close:
            g = self._gpu_index[key]
            if g.name not in names:
                names.append(g.name)
        hint = f"did you mean: {', '.join(names)}?" if names else "see `cudabox matrix show gpus`"
        raise InputError(f"{where}: unknown GPU {text!r}; {hint}")

    # ---- frameworks

    def builds_of(self, framework: str) -> list[Build]:
        return [b for b in self.builds if b.framework == framework]

    def companions_of(self, name: str) -> list[Companion]:
        return [c for c in self.companions if c.name == name]

    def cudnn_series(self, version: str) -> CudnnSeries | None:
        parts = version.split(".")
        return next((s for s in self.cudnn if s.series == ".".join(parts[:2])), None)

    def cudnn_builds(self) -> list[CudnnBuild]:
        return list(self._cudnn_sorted)

    @cached_property
    def _cudnn_sorted(self) -> tuple[CudnnBuild, ...]:
        return tuple(sorted((b for s in self.cudnn for b in s.builds), key=lambda b: Version(b.version)))

    @cached_property
    def cudnn_versions(self) -> tuple[str, ...]:
        """Every known cuDNN build version, oldest first."""
        return tuple(b.version for b in self._cudnn_sorted)

    def stack_minors(self, b: Build) -> list[str]:
        """The CUDA minors a stack with build `b` can have: its own first, then newest first.

        A system-CUDA build runs on its own minor or a newer one of the same major whose toolkit still
        ships the sonames it loads; a wheel build pinned to one runtime (or a torch variant) is that CUDA;
        a build whose wheels take a range (JAX plugins, TF >= 2.20's [and-cuda]) any toolkit of its
        major from its minimum up. Memoised: the resolver asks for every candidate.
        """
        key = (b.framework, b.version, b.variant)
        if key not in self._stack_minors:
            self._stack_minors[key] = self._find_stack_minors(b)
        return self._stack_minors[key]

    @cached_property
    def _stack_minors(self) -> dict:
        return {}

    def _find_stack_minors(self, b: Build) -> list[str]:
        runtime = b.cuda_runtime
        if b.wheels_cuda and (runtime is None and b.cuda_min is None
                              or runtime and runtime.startswith("==") and "," not in runtime):
            return [b.cuda]
        low = Version(b.cuda_min or b.cuda)
        spec = SpecifierSet(runtime) if runtime else None
        out = [b.cuda]
        for tk in reversed(self.toolkits):
            if tk.major != b.cuda_major or tk.key < low or tk.version == b.cuda:
                continue
            if spec is not None and not any(Version(f"{tk.version}.{p}") in spec for p in (0, 999999)):
                continue
            out.append(tk.version)
        return [x for x in out if not self.missing_sonames(x, b.sonames)]

    def missing_sonames(self, minor: str, sonames) -> list[str]:
        """The sonames (of a system-CUDA build) that toolkit `minor` doesn't ship."""
        return [s for s in sonames if s not in self.libraries or not self.libraries[s].shipped_by(minor)]

    def image(self, cuda: str) -> CudaImage | None:
        return next((i for i in self.cuda_images if i.cuda == cuda), None)

    @cached_property
    def known_pythons(self) -> tuple[str, ...]:
        """Every Python minor named anywhere in the data, oldest first."""
        seen = {p for b in self.builds for p in b.python.versions}
        seen |= {o.python for o in self.os_info.values()}
        return tuple(sorted(seen, key=Version))


def _cc_from_text(text: str) -> str | None:
    m = re.fullmatch(r"sm_?(\d+)(\d)", text.strip().lower())
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    m = re.fullmatch(r"(\d{1,2})\.(\d)", text.strip())
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    return None
