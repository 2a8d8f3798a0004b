"""The domain: typed records of the compatibility matrix.

These are plain frozen dataclasses filled by `knowledge.loader` from the YAML
in matrices/. They carry facts and small, obviously-correct helpers; the
decisions (which stack, which base image) live in `cudabox.resolve`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from .arch import ArchList, DriverVersion, cc_tuple, parse_arch, sm_of  # noqa: F401 - re-exported: matrix records

# --------------------------------------------------------------------------- versions


def cuda_version(text: str) -> Version:
    """A CUDA version ("12.8", "12.8.1") as a comparable Version."""
    return Version(str(text))


def minor_of(version: str) -> str:
    """ "12.8.1" -> "12.8" """
    parts = str(version).split(".")
    return ".".join(parts[:2])


# --------------------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Provenance:
    """Where a record comes from and how sure we are of it."""

    source: tuple[str, ...]
    status: str = "verified"  # verified | unverified | inferred
    note: str | None = None
    origin: str = ""  # file:line the record was read from (bundled or overlay)

    @property
    def certain(self) -> bool:
        return self.status == "verified"


# --------------------------------------------------------------------------- CUDA, drivers, GPUs


@dataclass(frozen=True)
class Source:
    key: str
    url: str
    title: str
    strength: str
    prov: Provenance


@dataclass(frozen=True)
class CudaMajor:
    major: int
    minor_compat_driver: DriverVersion
    wheel_suffix: str  # "-cu12"; "" for CUDA 13 (nvidia-cuda-runtime)
    cudnn_wheel: str  # nvidia-cudnn-cu12
    prov: Provenance
    tag: str = ""  # cu12: what cudnn.yaml's builds[].wheels call this major's wheels

    def wheel(self, component: str) -> str:
        """NVIDIA's pip wheel for a CUDA component: "cuda-runtime" -> nvidia-cuda-runtime-cu12."""
        return f"nvidia-{component}{self.wheel_suffix}"


@dataclass(frozen=True)
class CudaRelease:
    version: str  # "12.8.1"
    label: str  # "12.8 Update 1"
    driver: DriverVersion | None  # minimum Linux x86_64 driver
    prov: Provenance


@dataclass(frozen=True)
class Library:
    """A CUDA library soname and the toolkit minors that ship it (cuda.yaml `libraries`)."""

    soname: str  # "libcusolver.so.10"
    cuda: str  # specifier over toolkit minors ("==11.0")
    prov: Provenance

    def shipped_by(self, minor: str) -> bool:
        return cuda_version(minor) in SpecifierSet(self.cuda)


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit minor line (e.g. 12.8) with its releases and compilable SASS targets."""

    version: str  # "12.8"
    sass: tuple[str, ...]
    releases: tuple[CudaRelease, ...]
    prov: Provenance

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def key(self) -> Version:
        return cuda_version(self.version)

    @property
    def min_driver(self) -> DriverVersion | None:
        """The driver of the first (GA) release: the oldest that runs this minor natively."""
        drivers = [r.driver for r in self.releases if r.driver is not None]
        return min(drivers) if drivers else None

    @property
    def latest(self) -> CudaRelease | None:
        return max(self.releases, key=lambda r: cuda_version(r.version), default=None)

    def can_compile(self, cc: str) -> bool:
        return sm_of(cc) in self.sass


@dataclass(frozen=True)
class DriverBranch:
    branch: int
    cuda: str  # highest CUDA version the branch runs natively ("12.7" for R565)
    prov: Provenance


GPU_CLASSES = ("datacenter", "workstation", "consumer", "jetson")


@dataclass(frozen=True)
class GPU:
    name: str
    cc: str
    arch: str
    gpu_class: str
    memory_gb: float | None
    peak_fp16_tflops: float | None  # dense FP16/BF16 tensor, FP32 accumulate
    peak_bandwidth_gbs: float | None
    aliases: tuple[str, ...]
    prov: Provenance

    @property
    def sm(self) -> str:
        return sm_of(self.cc)

    @property
    def datacenter(self) -> bool:
        """Eligible for CUDA forward compatibility (cuda-compat)."""
        return self.gpu_class == "datacenter"


@dataclass(frozen=True)
class Thresholds:
    gemm_pass: float
    bandwidth_pass: float
    prov: Provenance


# --------------------------------------------------------------------------- cuDNN


@dataclass(frozen=True)
class CudnnBuild:
    version: str  # "9.10.2.21"
    wheels: tuple[str, ...]  # ("cu11", "cu12")


@dataclass(frozen=True)
class CudnnSeries:
    series: str  # "9.10"
    cuda: tuple[tuple[str, str], ...] | None  # inclusive (lo, hi) CUDA minor ranges; None = unknown
    min_cc: str | None
    builds: tuple[CudnnBuild, ...]
    prov: Provenance

    def supports_cuda(self, minor: str) -> bool | None:
        if self.cuda is None:
            return None
        v = cuda_version(minor)
        return any(cuda_version(lo) <= v <= cuda_version(hi) for lo, hi in self.cuda)


# --------------------------------------------------------------------------- frameworks


def python_specifier(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise ValueError(f"not a Python specifier: {text!r}") from exc


@dataclass(frozen=True)
class PythonSupport:
    """Which Pythons a release supports: an explicit list, or a Requires-Python specifier."""

    versions: tuple[str, ...] = ()
    spec: str | None = None

    def allows(self, python: str) -> bool:
        if self.versions:
            return python in self.versions
        if self.spec:
            return Version(python) in SpecifierSet(self.spec)
        return True

    def describe(self) -> str:
        if self.versions:
            return f"{self.versions[0]}-{self.versions[-1]}" if len(self.versions) > 1 else self.versions[0]
        return self.spec or "any"


@dataclass(frozen=True)
class Build:
    """One installable build of a framework release.

    torch 2.7.1 cu128, tensorflow[and-cuda] 2.15.1, jax[cuda12] 0.6.0, or
    tensorflow 2.10.0 on a system CUDA. The resolver works on these.
    """

    framework: str  # torch | tensorflow | jax
    version: str  # "2.7.1"
    variant: str  # "cu128" | "and-cuda" | "system" | "cuda12"
    cuda: str  # CUDA minor the build is made for ("12.8")
    cuda_min: str | None  # oldest CUDA minor it supports when that differs (JAX)
    cudnn: str | None  # specifier over cuDNN versions it needs ("==9.1.0.70"), None = no cuDNN pin
    cuda_runtime: str | None  # specifier on the CUDA runtime wheel when known ("==12.1.105")
    python: PythonSupport
    arch: ArchList
    wheels_cuda: bool  # CUDA user-space libraries come as pip wheels (no system CUDA needed)
    system_cudnn: str | None  # cuDNN series needed from the base image (TF < 2.14)
    pypi_default: bool  # this build is what plain `pip install torch==X` gets
    index: str | None  # extra package index it comes from
    requirement: str  # pip requirement: "torch==2.7.1+cu128", "jax[cuda12]==0.6.0"
    prov: Provenance
    sonames: tuple[str, ...] = ()  # system CUDA libraries it loads whose toolkit range the matrix knows

    @property
    def cuda_major(self) -> int:
        return int(self.cuda.split(".")[0])

    @property
    def label(self) -> str:
        return f"{self.framework} {self.version} ({self.variant})"


@dataclass(frozen=True)
class Companion:
    """A companion release (torchvision, torchaudio) and the framework version it pins."""

    name: str
    version: str
    pin: str | None  # specifier on its framework ("==2.5.1"); None = no pin
    prov: Provenance
    framework: str = "torch"


@dataclass(frozen=True)
class FrameworkRelease:
    """A release line as the matrix files record it (for `matrix show`)."""

    framework: str
    series: str
    versions: tuple[str, ...]
    python: PythonSupport
    summary: str  # one line: variants / CUDA / cuDNN
    prov: Provenance


# --------------------------------------------------------------------------- base images


@dataclass(frozen=True)
class OSInfo:
    os: str  # ubuntu24.04 | debian12
    python: str  # its system python3
    prov: Provenance
    glibc: str | None = None  # its libc6 ("2.36"): wheels must be manylinux_2_X with X <= this


@dataclass(frozen=True)
class SlimBase:
    image: str  # debian:bookworm-slim
    os: str
    prov: Provenance


@dataclass(frozen=True)
class Tool:
    """A build tool pinned for image builds (uv), from PyPI."""

    name: str
    version: str
    prov: Provenance


IMAGE_STATUSES = ("supported", "end-of-life", "deleted")


@dataclass(frozen=True)
class CudaImage:
    """One nvidia/cuda release (e.g. 12.4.1) and the tags it has."""

    cuda: str  # "12.4.1"
    lifecycle: str  # supported | end-of-life | deleted
    require: str | None  # NVIDIA_REQUIRE_CUDA
    cudnn: str | None  # cuDNN version in the cudnn flavours
    cudnn_prefix: str | None  # cudnn8 | cudnn9 | cudnn
    os: tuple[str, ...]
    cudnn_os: tuple[str, ...]
    prov: Provenance

    def tag(self, flavour: str, os_name: str, *, cudnn: bool = False) -> str:
        """nvidia/cuda tag, e.g. tag("runtime", "ubuntu22.04", cudnn=True) -> 12.4.1-cudnn-runtime-ubuntu22.04."""
        kind = f"{self.cudnn_prefix}-{flavour}" if cudnn else flavour
        return f"nvidia/cuda:{self.cuda}-{kind}-{os_name}"

    @property
    def forward_compat_branches(self) -> tuple[int, ...]:
        """Older driver branches NVIDIA_REQUIRE_CUDA admits on datacenter GPUs (brand=tesla,driver>=470,...)."""
        if not self.require:
            return ()
        return tuple(sorted({int(m) for m in re.findall(r"brand=tesla,driver>=(\d+)", self.require)}))


def as_data(obj):
    """Dataclasses -> plain JSON-able data (for --json output and lock files)."""
    import dataclasses

    if isinstance(obj, DriverVersion):
        return obj.text
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: as_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): as_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_data(v) for v in obj]
    return obj
