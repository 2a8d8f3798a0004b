"""The resolved stack: what goes into the image, and why. Serialised into cudabox.lock."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields


@dataclass(frozen=True)
class Target:
    """A GPU the image must run on, with what the smoke test judges its kernels against."""

    gpu: str
    cc: str
    sm: str
    peak_fp16_tflops: float | None = None
    peak_bandwidth_gbs: float | None = None


@dataclass(frozen=True)
class FrameworkPick:
    name: str  # torch | tensorflow | jax
    version: str  # 2.7.1
    variant: str  # cu128 | and-cuda | system | cuda12
    arch: str  # human description of the compiled arch list
    status: str = "verified"  # data confidence of the matrix record it came from


@dataclass(frozen=True)
class Code:
    """The GPU code one framework carries (its SASS and PTX lists, or JAX's documented minimum CC);
    name "cuda" for a plain stack: the SASS targets its toolkit's NVRTC compiles."""

    name: str
    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    min_cc: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """What `does this stack run on this driver and these GPUs` needs, written down at lock time so that
    no later step reloads the matrix (cudabox/lock/fit.py reads it)."""

    native_driver: str | None  # oldest driver that runs the stack's CUDA natively (PTX JIT works)
    minor_compat_driver: str | None = None  # minor-compat stacks: oldest driver (SASS only, no PTX JIT)
    forward_compat_branches: tuple[int, ...] = ()  # forward-compat stacks: branches cuda-compat serves
    code: tuple[Code, ...] = ()
    known_ccs: tuple[str, ...] = ()  # compute capabilities the matrix knew (k8s: which to accept)
    products: tuple[tuple[str, str], ...] = ()  # target GPU -> GFD nvidia.com/gpu.product name

    @classmethod
    def from_dict(cls, d: dict) -> "RunFacts":
        return cls(native_driver=d.get("native_driver"), minor_compat_driver=d.get("minor_compat_driver"),
                   forward_compat_branches=tuple(d.get("forward_compat_branches", ())),
                   code=tuple(Code(c["name"], tuple(c.get("sass", ())), tuple(c.get("ptx", ())), c.get("min_cc"))
                              for c in d.get("code", ())),
                   known_ccs=tuple(d.get("known_ccs", ())),
                   products=tuple((k, v) for k, v in (d.get("products") or {}).items()))

    def to_dict(self) -> dict:
        return {"native_driver": self.native_driver, "minor_compat_driver": self.minor_compat_driver,
                "forward_compat_branches": list(self.forward_compat_branches),
                "code": [{"name": c.name, "sass": list(c.sass), "ptx": list(c.ptx), "min_cc": c.min_cc}
                         for c in self.code],
                "known_ccs": list(self.known_ccs), "products": dict(self.products)}


@dataclass(frozen=True)
class Pin:
    """One locked package: exact version, the one index it comes from, and its files for the image's
    platform (URL and sha256 each). The build installs exactly these files, hashes required.

    A git requirement has no file to hash: it is pinned to the commit the lock resolved (`vcs`,
    `git+URL@<commit id>`), which names its content as a hash does, and `files` is empty."""

    name: str
    version: str
    index: str  # the index URL; "direct" for a requirement that names its own URL (a file or git)
    files: tuple[tuple[str, str], ...]  # (url, sha256)
    vcs: str | None = None  # git+https://host/repo@<commit id>[#subdirectory=...]

    def to_dict(self) -> dict:
        data = {"name": self.name, "version": self.version, "index": self.index,
                "files": [{"url": u, "sha256": h} for u, h in self.files]}
        if self.vcs:
            data["vcs"] = self.vcs
        return data

    @classmethod
    def from_dict(cls, d: dict) -> "Pin":
        return cls(d["name"], d["version"], d["index"], tuple((f["url"], f["sha256"]) for f in d["files"]),
                   d.get("vcs"))


@dataclass(frozen=True)
class Stack:
    """One concrete, runnable CUDA stack."""

    python: str  # "3.11"
    python_install: str  # os | uv
    cuda: str  # CUDA minor of the stack ("12.8")
    cudnn: str | None  # exact cuDNN version ("9.10.2.21") or None
    flavour: str  # slim | runtime | devel
    base_image: str  # debian:bookworm-slim | nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
    os: str  # debian12 | ubuntu24.04
    packages: dict  # name -> exact version (or X.Y.* for NVIDIA wheels whose patch the matrix doesn't know)
    requirements: tuple[str, ...]  # pip requirement lines of the stack, in install order
    index_urls: tuple[str, ...]  # extra package indexes (download.pytorch.org/whl/cu128)
    requirement: str  # NVIDIA_REQUIRE_CUDA
    min_driver: str | None  # oldest driver the stack runs on (given its driver mode)
    driver_mode: str  # native | minor-compat | forward-compat | unknown
    targets: tuple[Target, ...] = ()
    frameworks: tuple[FrameworkPick, ...] = ()
    why: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    os_packages: tuple[str, ...] = ()  # apt packages the frameworks need (paddle: libgomp1), frameworks.yaml
    runs_on: RunFacts | None = None  # driver floors and GPU code, as data (None: a lock from before them)
    tools: dict = field(default_factory=dict)  # build tools in the image: {"uv": "0.13.9"} (matrices/images.yaml)
    smoke: dict = field(default_factory=dict)  # the smoke test: source_sha256, gemm_pass, bandwidth_pass
    indexes: dict = field(default_factory=dict)  # package -> the one index it must come from (framework wheels)
    platform: str | None = None  # uv --python-platform of the image: x86_64-manylinux_2_36
    pins: tuple[Pin, ...] | None = None  # every package of the stack image, locked (None: not locked yet)
    tool_pins: tuple[Pin, ...] | None = None  # the build tools' wheels (uv), locked like the packages

    # The fields that change what gets built; `why`/`warnings` explain but don't build.
    BUILD_FIELDS = ("python", "python_install", "cuda", "cudnn", "flavour", "base_image", "os", "packages",
                    "requirements", "index_urls", "requirement", "targets", "tools", "smoke", "indexes",
                    "platform", "pins")

    def to_dict(self) -> dict:
        data = json.loads(json.dumps(asdict(self)))
        if not data["os_packages"]:  # absent unless a framework needs some: older stacks keep their hash
            del data["os_packages"]
        data["runs_on"] = self.runs_on.to_dict() if self.runs_on else None
        for key in ("pins", "tool_pins"):
            value = getattr(self, key)
            data[key] = None if value is None else [p.to_dict() for p in sorted(value, key=lambda p: p.name)]
        if self.tool_pins is None:  # absent unless locked: a lock from before them keeps its hash
            del data["tool_pins"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Stack":
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["targets"] = tuple(Target(**t) for t in values.get("targets", ()))
        values["frameworks"] = tuple(FrameworkPick(**f) for f in values.get("frameworks", ()))
        for key in ("pins", "tool_pins"):
            if values.get(key) is not None:
                values[key] = tuple(Pin.from_dict(p) for p in values[key])
        if values.get("runs_on") is not None:
            values["runs_on"] = RunFacts.from_dict(values["runs_on"])
        for key in ("requirements", "index_urls", "why", "warnings", "os_packages"):
            values[key] = tuple(values.get(key, ()))
        return cls(**values)

    @property
    def hash(self) -> str:
        """Content address of the stack: every project with the same stack shares its image."""
        return digest(self.build_dict())

    def build_dict(self) -> dict:
        """The build fields; the pins (long: every file URL and hash) by their own digest."""
        data = self.to_dict()
        optional = tuple(k for k in ("os_packages", "tool_pins") if k in data)
        out = {k: data[k] for k in self.BUILD_FIELDS + optional}
        for key in ("pins", "tool_pins"):
            if out.get(key) is not None:
                out[key] = "sha256:" + digest(out[key])
        return out

    @property
    def framework_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.frameworks)


def digest(obj) -> str:
    """sha256 of canonical JSON."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
