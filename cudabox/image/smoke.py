"""cudabox smoke test: prove that the CUDA stack inside an image works.

This file is copied into every cudabox image as /opt/cudabox/smoke.py and run
by `cudabox validate` as `python /opt/cudabox/smoke.py --json`.  It must run
on any Python >= 3.8 with the standard library only, so it talks to the CUDA
libraries through ctypes.

    python smoke.py [--expect PATH] [--json] [--target sm_XY]... [--no-gpu]

What it checks (each check gives pass / fail / warn / skip):
  python, packages    the venv holds what cudabox installed
  framework.<name>    torch / tensorflow / jax import and were built for this CUDA
  cudart, cudnn       the shared libraries load and report the expected version
  nvrtc               the runtime compiler can build a kernel for every target GPU
  gpu.*               only with a GPU: driver, CUDA context, memory bandwidth, GEMM

Overall status and exit code:
  passed              0   everything passed and the GPU checks really ran
  failed              1   at least one check failed
  bad usage / expect  2
  passed-without-gpu  4   everything that can run without a GPU passed; no GPU work ran

See docs/smoke-test.md for the expect.json and report formats.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import importlib
import importlib.metadata
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import time

SCHEMA = "cudabox.smoke/v1"
EXPECT_SCHEMA = "cudabox.expect/v1"
DEFAULT_EXPECT = "/opt/cudabox/expect.json"
DEFAULT_THRESHOLDS = {"gemm_pass": 0.5, "bandwidth_pass": 0.6}
FRAMEWORKS = ("torch", "jax", "tensorflow")  # also the order tried for the GEMM

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_PASSED_WITHOUT_GPU = 0, 1, 2, 4
EXIT_CODES = {"passed": EXIT_PASSED, "failed": EXIT_FAILED,
              "passed-without-gpu": EXIT_PASSED_WITHOUT_GPU, "error": EXIT_USAGE}

# Two tiny kernels: saxpy proves NVRTC compiles real code; copy_f4 measures
# device-memory bandwidth (every byte is read once and written once).
KERNELS = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void copy_f4(const float4* __restrict__ src,
                                   float4* __restrict__ dst, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}
"""


class UsageError(Exception):
    """Bad command line or expect file: exit code 2."""


class CudaError(Exception):
    """A CUDA library call returned an error code."""


# --------------------------------------------------------------------------
# Versions and architectures (pure functions, unit-tested directly)
# --------------------------------------------------------------------------

def version_tuple(text):
    """'12.8.93' -> (12, 8, 93); stops at the first non-numeric part."""
    parts = []
    for piece in str(text).split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if match.group() != piece:
            break
    return tuple(parts)


def _split_version(text):
    """'2.7.1+cu128' -> ((2, 7, 1), '', 'cu128'): release, suffix, local label."""
    text = str(text).strip().lower()
    text, _, local = text.partition("+")
    match = re.match(r"v?(\d+(?:\.\d+)*)(.*)$", text)
    if not match:
        return (), text, local
    release = tuple(int(p) for p in match.group(1).split("."))
    return release, match.group(2).lstrip("."), local


def _padded(release, length):
    return tuple(release) + (0,) * (length - len(release))


def version_matches(installed, spec):
    """Does an installed version satisfy an expected one ('2.7.1' or '12.8.*')?

    Follows PEP 440 '==' without needing `packaging`: '12.8' equals '12.8.0';
    a local label ('+cu128') is ignored unless the spec names one; 'X.Y.*'
    matches any release starting with X.Y.
    """
    spec = str(spec).strip()
    if spec.startswith("=="):
        spec = spec[2:].strip()
    if re.search(r"[<>!~=,\s]", spec):
        raise ValueError("unsupported version spec %r (use 'X.Y.Z' or 'X.Y.*')" % spec)
    got_release, got_suffix, got_local = _split_version(installed)
    if spec.endswith(".*"):
        prefix = version_tuple(spec[:-2])
        return bool(prefix) and _padded(got_release, len(prefix))[:len(prefix)] == prefix
    want_release, want_suffix, want_local = _split_version(spec)
    length = max(len(got_release), len(want_release))
    if _padded(got_release, length) != _padded(want_release, length):
        return False
    if got_suffix != want_suffix:
        return False
    return not want_local or want_local == got_local


def major_minor(text):
    """'12.8.1' -> '12.8' (the part of a CUDA version that must match)."""
    return ".".join(str(p) for p in version_tuple(text)[:2])


def decode_cudnn_version(number):
    """cudnnGetVersion() integer -> (major, minor, patch).

    cuDNN 9+ encodes major*10000 + minor*100 + patch (91002 = 9.10.2);
    cuDNN 8 and older encode major*1000 + minor*100 + patch (8907 = 8.9.7).
    """
    number = int(number)
    if number >= 90000:
        return number // 10000, (number % 10000) // 100, number % 100
    return number // 1000, (number % 1000) // 100, number % 100


def cudnn_matches(found, expected):
    """Compare (major, minor, patch) with an expected '9.10.2.21' on its first 3 parts."""
    want = version_tuple(expected)[:3]
    return bool(want) and tuple(found)[:len(want)] == want


def parse_arch(text):
    """'sm_90a' -> ('sm', 9, 0, 'a'); 'compute_120' -> ('compute', 12, 0, '').

    The last digit is the minor version, the rest the major (sm_120 = 12.0).
    Returns None for anything else (e.g. ROCm's 'gfx90a').
    """
    match = re.match(r"^(sm|compute)_(\d+)(\d)([af]?)$", str(text).strip().lower())
    if not match:
        return None
    kind, major, minor, suffix = match.groups()
    return kind, int(major), int(minor), suffix


def parse_cc(value):
    """Compute capability as (major, minor) from '12.0', 12.0, '8.6' or 'sm_86'."""
    text = str(value).strip()
    match = re.match(r"^(\d+)\.(\d+)$", text)
    if match:
        return int(match.group(1)), int(match.group(2))
    arch = parse_arch(text)
    if arch:
        return arch[1], arch[2]
    raise ValueError("not a compute capability: %r" % (value,))


def arch_covers(arch_list, cc):
    """Return the entry of arch_list that a GPU of compute capability `cc`
    ((major, minor) or '12.0') will run - the closest SASS, else the closest
    PTX - or None if no entry can run on it.

    Rules (NVIDIA's compatibility rules for cubins and PTX):
      sm_XY       SASS runs on same major X, minor >= Y (sm_86 runs on 8.9).
      sm_XYf      family-specific SASS: the same rule (sm_100f runs on 10.3).
      sm_XYa      arch-specific SASS runs on exactly X.Y and nothing else, so
                  sm_90a covers 9.0 only; never 9.x>0 nor 10.0.
      compute_XY  PTX is JIT-compiled by the driver for any CC >= X.Y.
      compute_XYf / compute_XYa   family / exact, as for sm_.
    """
    major, minor = parse_cc(cc) if not isinstance(cc, tuple) else cc
    best, best_key = None, None
    for entry in arch_list:
        arch = parse_arch(entry)
        if arch is None:
            continue
        kind, amaj, amin, suffix = arch
        if suffix == "a":
            ok = (amaj, amin) == (major, minor)
        elif kind == "sm" or suffix == "f":
            ok = amaj == major and amin <= minor
        else:
            ok = (amaj, amin) <= (major, minor)
        key = (kind == "sm", amaj, amin)
        if ok and (best_key is None or key > best_key):
            best, best_key = entry, key
    return best


# --------------------------------------------------------------------------
# Finding and loading shared libraries
# --------------------------------------------------------------------------

def _site_dirs():
    return [p for p in sys.path if p and os.path.isdir(p)
            and os.path.basename(p) in ("site-packages", "dist-packages")]


def library_dirs():
    """Directories searched for CUDA libraries, most specific first.

    NVIDIA's pip wheels put them in site-packages/nvidia/<component>/lib
    (CUDA 12: nvidia/cuda_runtime/lib, nvidia/cudnn/lib, ...; CUDA 13:
    nvidia/cu13/lib); a system CUDA lives in /usr/local/cuda and ldconfig paths.
    """
    dirs = []
    for site in _site_dirs():
        dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
        dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib64")))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs += [os.path.join(os.environ[var], "lib64"), os.path.join(os.environ[var], "lib")]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib"]
    dirs += sorted(glob.glob("/usr/local/cuda/targets/*/lib"))
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    seen, result = set(), []
    for d in dirs:
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            result.append(d)
    return result


def _ldconfig_paths(stem):
    """Paths that `ldconfig -p` knows for libSTEM.so*."""
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            out = subprocess.run([exe, "-p"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        paths = []
        for line in out.decode(errors="replace").splitlines():
            name, _, path = line.strip().partition(" => ")
            if name.split(" ")[0].startswith(stem + ".so") and path:
                paths.append(path.strip())
        return paths
    return []


def find_library(stem):
    """All distinct files named STEM.so or STEM.so.N[.N...] (never e.g.
    libnvrtc-builtins.so or libnvrtc.alt.so), most specific location first."""
    pattern = re.compile(r"^%s\.so(\.\d+)*$" % re.escape(stem))
    found, real = [], set()
    candidates = []
    for d in library_dirs():
        candidates += sorted(glob.glob(os.path.join(d, stem + ".so*")), key=len, reverse=True)
    candidates += _ldconfig_paths(stem)
    for path in candidates:
        if pattern.match(os.path.basename(path)) and os.path.exists(path):
            key = os.path.realpath(path)
            if key not in real:
                real.add(key)
                found.append(path)
    return found


def load_library(stem):
    """dlopen the first STEM.so* found. Returns (CDLL, path, others) or raises OSError."""
    paths = find_library(stem)
    if not paths:
        raise OSError("%s.so* not found in %s or the ldconfig cache"
                      % (stem, ", ".join(["site-packages/nvidia/*/lib", "/usr/local/cuda",
                                          "LD_LIBRARY_PATH"])))
    return ctypes.CDLL(paths[0]), paths[0], paths[1:]


def _where(path, others):
    text = path
    if others:
        text += " (also found: %s)" % ", ".join(others[:2])
    return text


# --------------------------------------------------------------------------
# Checks that need no GPU. Each returns (status, detail).
# --------------------------------------------------------------------------

def check_python(expect, targets):
    """The image's Python is the one the stack was resolved for."""
    running = "%d.%d" % sys.version_info[:2]
    want = expect.get("python")
    if not want:
        return "skip", "Python %s (no version expected)" % sys.version.split()[0]
    if running == major_minor(want):
        return "pass", "Python %s matches %s" % (sys.version.split()[0], want)
    return "fail", "Python %s is running, expected %s" % (sys.version.split()[0], want)


def check_packages(expect, targets):
    """Every pinned distribution is installed at the pinned version."""
    wanted = expect.get("packages") or {}
    if not wanted:
        return "skip", "no packages expected"
    good, bad = [], []
    for name, spec in sorted(wanted.items()):
        try:
            got = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            bad.append("%s not installed (want %s)" % (name, spec))
            continue
        try:
            ok = version_matches(got, spec)
        except ValueError as exc:
            bad.append("%s: %s" % (name, exc))
            continue
        if ok:
            good.append("%s %s" % (name, got))
        else:
            bad.append("%s is %s, expected %s" % (name, got, spec))
    if bad:
        return "fail", "; ".join(bad)
    return "pass", "%d match: %s" % (len(good), ", ".join(good))


def _verdict(problems, facts):
    """A framework check's result: what is wrong first, then what was found."""
    if problems:
        return "fail", "%s [%s]" % ("; ".join(problems), ", ".join(facts))
    return "pass", ", ".join(facts)


def _cuda_problem(built_for, expect):
    """A problem text if a framework's CUDA differs from expect.cuda (major.minor)."""
    want = expect.get("cuda")
    if want and major_minor(built_for) != major_minor(want):
        return "built for CUDA %s, expected %s" % (built_for, want)
    return None


def check_torch(expect, targets):
    """torch was built for this CUDA/cuDNN and has kernels for the target GPUs."""
    import torch
    facts, problems = ["torch %s" % torch.__version__], []
    cuda = torch.version.cuda
    if cuda is None:
        facts.append("CPU-only build (torch.version.cuda is None)")
        if expect.get("cuda"):
            problems.append("a CPU-only torch cannot use CUDA %s" % expect["cuda"])
        return _verdict(problems, facts)
    facts.append("CUDA %s" % cuda)
    problems.append(_cuda_problem(cuda, expect))
    number = torch.backends.cudnn.version()
    if number:
        facts.append("cuDNN %d.%d.%d" % decode_cudnn_version(number))
    if expect.get("cudnn") and not number:
        problems.append("cuDNN is not available to torch")
    elif expect.get("cudnn") and not cudnn_matches(decode_cudnn_version(number), expect["cudnn"]):
        problems.append("torch loads cuDNN %d.%d.%d, expected %s"
                        % (decode_cudnn_version(number) + (expect["cudnn"],)))
    if targets:
        # get_arch_list() returns [] without a GPU in torch < 2.8; the C
        # function underneath answers from build-time data.
        flags = getattr(torch._C, "_cuda_getArchFlags", None)
        archs = (flags() or "").split() if flags else torch.cuda.get_arch_list()
        facts.append("archs %s" % " ".join(archs))
        missing = ["%s (%s)" % (t["arch"], t["label"]) for t in targets
                   if not arch_covers(archs, t["cc"])]
        if missing:
            problems.append("no kernels that run on %s" % ", ".join(missing))
    return _verdict([p for p in problems if p], facts)


def check_tensorflow(expect, targets):
    """tensorflow is a CUDA build for this CUDA/cuDNN."""
    import tensorflow as tf
    info = dict(tf.sysconfig.get_build_info())
    facts, problems = ["tensorflow %s" % tf.__version__], []
    if not info.get("is_cuda_build"):
        facts.append("not a CUDA build")
        if expect.get("cuda"):
            problems.append("a CPU-only tensorflow cannot use CUDA %s" % expect["cuda"])
    cuda, cudnn = info.get("cuda_version"), info.get("cudnn_version")
    if cuda:
        facts.append("CUDA %s" % cuda)
        problems.append(_cuda_problem(cuda, expect))
    if cudnn:
        facts.append("cuDNN %s" % cudnn)
        # TF often reports only the major ('9'): compare as many parts as it gives.
        have = version_tuple(cudnn)[:3]
        want = version_tuple(expect.get("cudnn") or "")[:len(have)]
        if want and have != want:
            problems.append("built for cuDNN %s, expected %s" % (cudnn, expect["cudnn"]))
    return _verdict([p for p in problems if p], facts)


def _jax_cuda_plugin(expect):
    """(distribution, version, CUDA major) of the installed jax CUDA plugin, or
    None; a plugin for the expected CUDA major is preferred."""
    want = version_tuple(expect.get("cuda") or "")[:1]
    for major in list(want) + [13, 12, 11]:
        for dist in ("jax-cuda%d-plugin" % major, "jax-cuda%d-pjrt" % major):
            try:
                return dist, importlib.metadata.version(dist), major
            except importlib.metadata.PackageNotFoundError:
                pass
    return None


def check_jax(expect, targets):
    """jax and jaxlib import, and a CUDA plugin for this CUDA major imports.
    (jax publishes no arch list, so target coverage is left to the GPU checks.)"""
    import jax
    import jaxlib
    facts = ["jax %s" % jax.__version__, "jaxlib %s" % getattr(jaxlib, "__version__", "?")]
    plugin = _jax_cuda_plugin(expect)
    if plugin is None:
        facts.append("no CUDA plugin")
        return _verdict(["CPU-only jax cannot use CUDA %s" % expect["cuda"]]
                        if expect.get("cuda") else [], facts)
    dist, version, major = plugin
    facts.append("%s %s" % (dist, version))
    errors = []
    for module in ("jax_cuda%d_plugin" % major, "jax_plugins.xla_cuda%d" % major):
        try:
            importlib.import_module(module)
            break
        except ImportError as exc:
            errors.append("%s: %s" % (module, exc))
    else:
        return _verdict(["the CUDA plugin does not import (%s)" % "; ".join(errors)], facts)
    want = version_tuple(expect.get("cuda") or "")
    if want and want[0] != major:
        return _verdict(["the plugin is for CUDA %d, expected %s" % (major, expect["cuda"])], facts)
    return _verdict([], facts)


FRAMEWORK_CHECKS = {"torch": check_torch, "tensorflow": check_tensorflow, "jax": check_jax}


def check_cudart(expect, targets):
    """libcudart loads and is the expected CUDA version (no GPU needed)."""
    try:
        lib, path, others = load_library("libcudart")
    except OSError as exc:
        if not expect.get("cuda"):
            return "skip", "no CUDA version expected and no libcudart found"
        return "fail", str(exc)
    value = ctypes.c_int()
    if lib.cudaRuntimeGetVersion(ctypes.byref(value)) != 0:
        return "fail", "cudaRuntimeGetVersion failed (%s)" % path
    found = "%d.%d" % (value.value // 1000, (value.value % 1000) // 10)
    detail = "CUDA runtime %s at %s" % (found, _where(path, others))
    if not expect.get("cuda"):
        return "pass", detail + " (no version expected)"
    if found != major_minor(expect["cuda"]):
        return "fail", "CUDA runtime is %s, expected %s (%s)" % (found, expect["cuda"], path)
    return "pass", detail


def _preload_for_cudnn():
    """cuDNN sub-libraries may link cuBLAS; load the image's copy first so the
    dynamic linker resolves them by soname, as the frameworks do."""
    for stem in ("libcudart", "libcublasLt", "libcublas", "libnvrtc"):
        with contextlib.suppress(OSError):
            load_library(stem)


def check_cudnn(expect, targets):
    """libcudnn and its sub-libraries load; cudnnGetVersion() is the expected one."""
    want = expect.get("cudnn")
    try:
        lib, path, others = load_library("libcudnn")
    except OSError as exc:
        return ("fail", str(exc)) if want else ("skip", "no cuDNN expected, none found")
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    found = decode_cudnn_version(lib.cudnnGetVersion())
    text = "%d.%d.%d" % found
    # cuDNN >= 8 is split into sub-libraries loaded on demand: load them now,
    # so a missing one or a missing dependency (e.g. libz.so.1) shows up here.
    _preload_for_cudnn()
    subs = sorted(p for p in glob.glob(os.path.join(os.path.dirname(path), "libcudnn_*.so.%d" % found[0])))
    broken = []
    for sub in subs:
        try:
            ctypes.CDLL(sub)
        except OSError as exc:
            broken.append(str(exc))
    if broken:
        return "fail", "cuDNN %s sub-libraries fail to load: %s" % (text, "; ".join(broken))
    detail = "cuDNN %s at %s, %d sub-libraries load" % (text, _where(path, others), len(subs))
    if not want:
        return "skip", detail + " (no version expected)"
    if not cudnn_matches(found, want):
        return "fail", "cuDNN is %s, expected %s (%s)" % (text, want, path)
    return "pass", detail


class Nvrtc:
    """The few NVRTC calls we need (no GPU needed to compile)."""

    def __init__(self):
        self.lib, self.path, self.others = load_library("libnvrtc")
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = "%d.%d" % (major.value, minor.value)

    def supported_archs(self):
        """e.g. [50, 52, ..., 90] (nvrtcGetSupportedArchs, NVRTC >= 11.2)."""
        if not hasattr(self.lib, "nvrtcGetSupportedArchs"):
            return []
        count = ctypes.c_int()
        self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(count))
        archs = (ctypes.c_int * count.value)()
        self.lib.nvrtcGetSupportedArchs(archs)
        return list(archs)

    def compile(self, arch, source=KERNELS):
        """Compile for 'sm_XY' (returns CUBIN bytes) or 'compute_XY' (PTX bytes).
        Raises CudaError with the NVRTC log on failure."""
        lib, prog = self.lib, ctypes.c_void_p()
        result = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"smoke.cu",
                                        0, None, None)
        if result != 0:
            raise CudaError("nvrtcCreateProgram: %s" % lib.nvrtcGetErrorString(result).decode())
        try:
            options = (ctypes.c_char_p * 1)(("--gpu-architecture=%s" % arch).encode())
            result = lib.nvrtcCompileProgram(prog, 1, options)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value + 1)
            lib.nvrtcGetProgramLog(prog, log)
            if result != 0:
                raise CudaError("%s; log: %s" % (lib.nvrtcGetErrorString(result).decode(),
                                                 log.value.decode(errors="replace").strip()))
            what = "CUBIN" if arch.startswith("sm_") else "PTX"
            getsize, get = getattr(lib, "nvrtcGet%sSize" % what), getattr(lib, "nvrtcGet%s" % what)
            getsize(prog, ctypes.byref(size))
            out = ctypes.create_string_buffer(size.value)
            get(prog, out)
            if size.value == 0:
                raise CudaError("NVRTC returned an empty %s" % what)
            return out.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def check_nvrtc(expect, targets):
    """NVRTC compiles a real kernel for every target GPU (CUBIN), or to PTX
    when no target is known. A toolkit too old for a GPU fails here."""
    try:
        nvrtc = Nvrtc()
    except OSError as exc:
        return "skip", "no NVRTC in this image: %s" % exc
    supported = nvrtc.supported_archs()
    span = "; it supports sm_%d..sm_%d" % (min(supported), max(supported)) if supported else ""
    if not targets:
        arch = "compute_75" if not supported or 75 in supported else "compute_%d" % min(supported)
        ptx = nvrtc.compile(arch)
        return "pass", "NVRTC %s compiled saxpy to %d bytes of PTX for %s (no targets given)" % (
            nvrtc.version, len(ptx), arch)
    done, failed = [], []
    for target in targets:
        try:
            cubin = nvrtc.compile(target["arch"])
            done.append("%s %dB" % (target["arch"], len(cubin)))
        except CudaError as exc:
            failed.append("NVRTC %s cannot compile for %s (%s)%s: %s"
                          % (nvrtc.version, target["arch"], target["label"], span, exc))
    if failed:
        return "fail", "; ".join(failed) + (" | compiled: " + ", ".join(done) if done else "")
    return "pass", "NVRTC %s compiled CUBINs: %s (%s)" % (nvrtc.version, ", ".join(done),
                                                         _where(nvrtc.path, nvrtc.others))


# --------------------------------------------------------------------------
# GPU: NVML for discovery, the CUDA driver API for kernels and timing
# --------------------------------------------------------------------------

class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


def _load_nvml():
    for name in ("libnvidia-ml.so.1", "/usr/lib/wsl/lib/libnvidia-ml.so.1"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def probe_gpus():
    """Ask NVML (the driver's management library) which GPUs this container sees.
    Returns (devices, driver_version, reason_if_none)."""
    nvml = _load_nvml()
    if nvml is None:
        return [], None, "libnvidia-ml.so.1 not found: no NVIDIA driver/runtime in this container"
    nvml.nvmlErrorString.restype = ctypes.c_char_p
    result = nvml.nvmlInit_v2()
    if result != 0:
        return [], None, "nvmlInit failed: %s" % nvml.nvmlErrorString(result).decode()
    try:
        buf = ctypes.create_string_buffer(96)
        nvml.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96))
        driver = buf.value.decode()
        count = ctypes.c_uint()
        nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        devices = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)):
                continue
            major, minor, memory = ctypes.c_int(), ctypes.c_int(), _NvmlMemory()
            nvml.nvmlDeviceGetName(handle, buf, ctypes.c_uint(96))
            nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor))
            nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory))
            devices.append({"index": index, "name": buf.value.decode(),
                            "cc": "%d.%d" % (major.value, minor.value),
                            "memory_total_mib": memory.total // 2**20,
                            "memory_free_mib": memory.free // 2**20, "driver": driver})
        reason = None if devices else "NVML sees 0 GPUs (driver %s); run with --gpus" % driver
        return devices, driver, reason
    finally:
        nvml.nvmlShutdown()


def check_driver(expect, devices, driver):
    """The host driver is new enough for this CUDA (expect.min_driver)."""
    listing = "; ".join("%s (cc %s, %d MiB)" % (d["name"], d["cc"], d["memory_total_mib"])
                        for d in devices)
    want = expect.get("min_driver")
    if want and version_tuple(driver) < version_tuple(want):
        return "fail", "driver %s is older than the required %s; %s" % (driver, want, listing)
    return "pass", "driver %s%s; %s" % (driver, " >= %s" % want if want else "", listing)


_c = ctypes
_CU_SIGNATURES = {  # CUDA driver API entry points we call, with their C argument types
    "cuInit": [_c.c_uint],
    "cuDeviceGet": [_c.POINTER(_c.c_int), _c.c_int],
    "cuDeviceGetName": [_c.c_char_p, _c.c_int, _c.c_int],
    "cuDeviceGetAttribute": [_c.POINTER(_c.c_int), _c.c_int, _c.c_int],
    "cuDevicePrimaryCtxRetain": [_c.POINTER(_c.c_void_p), _c.c_int],
    "cuDevicePrimaryCtxRelease_v2": [_c.c_int],
    "cuCtxSetCurrent": [_c.c_void_p],
    "cuCtxSynchronize": [],
    "cuMemGetInfo_v2": [_c.POINTER(_c.c_size_t), _c.POINTER(_c.c_size_t)],
    "cuMemAlloc_v2": [_c.POINTER(_c.c_uint64), _c.c_size_t],
    "cuMemFree_v2": [_c.c_uint64],
    "cuMemsetD32_v2": [_c.c_uint64, _c.c_uint, _c.c_size_t],
    "cuMemsetD16_v2": [_c.c_uint64, _c.c_ushort, _c.c_size_t],
    "cuMemcpyDtoH_v2": [_c.c_void_p, _c.c_uint64, _c.c_size_t],
    "cuModuleLoadData": [_c.POINTER(_c.c_void_p), _c.c_char_p],
    "cuModuleGetFunction": [_c.POINTER(_c.c_void_p), _c.c_void_p, _c.c_char_p],
    "cuModuleUnload": [_c.c_void_p],
    "cuLaunchKernel": [_c.c_void_p, _c.c_uint, _c.c_uint, _c.c_uint, _c.c_uint, _c.c_uint,
                       _c.c_uint, _c.c_uint, _c.c_void_p, _c.POINTER(_c.c_void_p), _c.c_void_p],
    "cuEventCreate": [_c.POINTER(_c.c_void_p), _c.c_uint],
    "cuEventRecord": [_c.c_void_p, _c.c_void_p],
    "cuEventSynchronize": [_c.c_void_p],
    "cuEventElapsedTime": [_c.POINTER(_c.c_float), _c.c_void_p, _c.c_void_p],
    "cuEventDestroy_v2": [_c.c_void_p],
    "cuGetErrorString": [_c.c_int, _c.POINTER(_c.c_char_p)],
}


class CudaDevice:
    """CUDA device 0 through the driver API (libcuda.so.1), using its primary
    context: the same one the CUDA runtime, cuBLAS and the frameworks use."""

    def __init__(self, ordinal=0):
        self.lib = ctypes.CDLL("libcuda.so.1")
        for name, argtypes in _CU_SIGNATURES.items():
            if hasattr(self.lib, name):
                getattr(self.lib, name).argtypes = argtypes
        self.ordinal, self.ctx, self.buffers = ordinal, ctypes.c_void_p(), []
        self.call("cuInit", 0)
        self.dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(self.dev), ordinal)
        name = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", name, 256, self.dev)
        self.name = name.value.decode()
        self.cc = (self.attribute(75), self.attribute(76))  # COMPUTE_CAPABILITY_MAJOR/MINOR
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.ctx), self.dev)
        self.call("cuCtxSetCurrent", self.ctx)

    def call(self, name, *args):
        result = getattr(self.lib, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(text))
            raise CudaError("%s failed: %s (%d)" % (name, (text.value or b"?").decode(), result))

    def attribute(self, number):
        value = ctypes.c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(value), number, self.dev)
        return value.value

    def free_bytes(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value

    def alloc(self, nbytes):
        ptr = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), nbytes)
        self.buffers.append(ptr.value)
        return ptr.value

    def read(self, ptr, nbytes):
        out = ctypes.create_string_buffer(nbytes)
        self.call("cuMemcpyDtoH_v2", out, ptr, nbytes)
        return out.raw

    def time_ms(self, step, iterations, warmup=2):
        """Run step() warmup + iterations times on the default stream; return the
        GPU time of the timed iterations in ms (CUDA events)."""
        for _ in range(warmup):
            step()
        self.call("cuCtxSynchronize")
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("cuEventCreate", ctypes.byref(start), 0)
        self.call("cuEventCreate", ctypes.byref(end), 0)
        try:
            self.call("cuEventRecord", start, None)
            for _ in range(iterations):
                step()
            self.call("cuEventRecord", end, None)
            self.call("cuEventSynchronize", end)
            ms = ctypes.c_float()
            self.call("cuEventElapsedTime", ctypes.byref(ms), start, end)
            return ms.value
        finally:
            self.lib.cuEventDestroy_v2(start)
            self.lib.cuEventDestroy_v2(end)

    def free_all(self):
        for ptr in self.buffers:
            self.lib.cuMemFree_v2(ptr)
        self.buffers = []

    def close(self):
        self.free_all()
        release = getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None) \
            or self.lib.cuDevicePrimaryCtxRelease
        release(self.dev)


def match_target(expect, name, cc):
    """The expect.targets entry for this GPU: by name, else by a unique CC."""
    targets = [t for t in expect.get("targets") or [] if isinstance(t, dict)]
    for t in targets:
        label = str(t.get("gpu") or "").lower()
        if label and (label in name.lower() or name.lower() in label):
            return t
    same_cc = [t for t in targets if t.get("cc") is not None and parse_cc(t["cc"]) == tuple(cc)]
    return same_cc[0] if len(same_cc) == 1 else None


def _judge(value, unit, peak, threshold):
    """pass/warn for a measured number against the target's peak (never fail)."""
    if not peak:
        return "pass", "%.1f %s (no expected peak known for this GPU)" % (value, unit)
    fraction = value / float(peak)
    detail = "%.1f %s = %.0f%% of the expected peak %.1f (threshold %.0f%%)" % (
        value, unit, 100 * fraction, float(peak), 100 * threshold)
    if fraction > 1.2:
        return "warn", detail + ": above peak, so the timing or the peak figure is wrong"
    return ("pass" if fraction >= threshold else "warn"), detail


def check_cuda_device(gpu):
    """cuInit and a context on device 0 work (driver and container agree)."""
    dev = gpu["device"] = CudaDevice(0)
    return "pass", "CUDA device 0: %s (cc %d.%d)" % (dev.name, dev.cc[0], dev.cc[1])


def check_bandwidth(expect, gpu, perf):
    """Copy a 256 MiB buffer with an NVRTC-compiled kernel; report GB/s."""
    dev = gpu["device"]
    arch = "sm_%d%d" % dev.cc
    nbytes = min(256 * 2**20, dev.free_bytes() // 8 // 2**20 * 2**20)  # small MIG slices
    try:
        nvrtc = Nvrtc()
    except OSError:
        return "skip", "no NVRTC in the image to build the copy kernel"
    try:
        cubin = nvrtc.compile(arch)
    except CudaError as exc:
        return "fail", "NVRTC %s cannot build the copy kernel for this GPU (%s): %s" % (
            nvrtc.version, arch, exc)
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    dev.call("cuModuleLoadData", ctypes.byref(module), cubin)
    try:
        dev.call("cuModuleGetFunction", ctypes.byref(function), module, b"copy_f4")
        src, dst = ctypes.c_uint64(dev.alloc(nbytes)), ctypes.c_uint64(dev.alloc(nbytes))
        count = ctypes.c_uint64(nbytes // 16)
        dev.call("cuMemsetD32_v2", src, 0x3F800000, nbytes // 4)  # 1.0f everywhere
        dev.call("cuMemsetD32_v2", dst, 0, nbytes // 4)
        params = (ctypes.c_void_p * 3)(ctypes.addressof(src), ctypes.addressof(dst),
                                       ctypes.addressof(count))
        blocks = (count.value + 255) // 256

        def launch():
            dev.call("cuLaunchKernel", function, blocks, 1, 1, 256, 1, 1, 0, None, params, None)

        iterations = 20
        ms = dev.time_ms(launch, iterations)
        tail = dev.read(dst.value + nbytes - 16, 16) + dev.read(dst.value, 16)
        if tail != struct.pack("<f", 1.0) * 8:
            return "fail", "copy kernel produced wrong data"
        gbs = 2 * nbytes * iterations / (ms / 1e3) / 1e9
        perf["bandwidth_gbs"] = round(gbs, 1)
        target = match_target(expect, dev.name, dev.cc) or {}
        thresholds = dict(DEFAULT_THRESHOLDS, **(expect.get("thresholds") or {}))
        if target.get("peak_bandwidth_gbs"):
            perf["bandwidth_fraction"] = round(gbs / float(target["peak_bandwidth_gbs"]), 3)
        return _judge(gbs, "GB/s", target.get("peak_bandwidth_gbs"), thresholds["bandwidth_pass"])
    finally:
        dev.free_all()
        dev.lib.cuModuleUnload(module)


def _gemm_torch(dev, n, iterations, half):
    import torch
    device = torch.device("cuda", 0)
    dtype = torch.bfloat16 if half == "bf16" else torch.float16
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    ones = torch.ones(n, n, device=device, dtype=dtype)
    check = float((ones @ ones)[0, 0].item())
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        a @ b
    end.record()
    end.synchronize()
    return start.elapsed_time(end), check


def _gemm_jax(dev, n, iterations, half):
    import jax
    import jax.numpy as jnp
    gpu = jax.devices("gpu")[0]
    dtype = jnp.bfloat16 if half == "bf16" else jnp.float16
    x = jax.device_put(jnp.ones((n, n), dtype), gpu)
    matmul = jax.jit(lambda p, q: p @ q)
    check = float(matmul(x, x)[0, 0])
    matmul(x, x).block_until_ready()
    begin = time.perf_counter()
    for _ in range(iterations):
        y = matmul(x, x)
    y.block_until_ready()
    return (time.perf_counter() - begin) * 1e3, check


def _gemm_tensorflow(dev, n, iterations, half):
    import tensorflow as tf
    with tf.device("/GPU:0"):
        x = tf.ones((n, n), dtype=tf.bfloat16 if half == "bf16" else tf.float16)
        check = float(tf.linalg.matmul(x, x)[0, 0].numpy())
        begin = time.perf_counter()
        for _ in range(iterations):
            y = tf.linalg.matmul(x, x)
        float(y[0, 0].numpy())
    return (time.perf_counter() - begin) * 1e3, check


def _gemm_cublas(dev, n, iterations, half):
    """cublasGemmEx on driver-API buffers filled with 1.0 (no framework needed)."""
    blas = load_library("libcublas")[0]
    c_ptr = ctypes.c_void_p
    blas.cublasCreate_v2.argtypes = [ctypes.POINTER(c_ptr)]
    blas.cublasDestroy_v2.argtypes = [c_ptr]
    blas.cublasGemmEx.argtypes = (
        [c_ptr] + [ctypes.c_int] * 5 + [ctypes.POINTER(ctypes.c_float)]
        + [c_ptr, ctypes.c_int, ctypes.c_int] * 2 + [ctypes.POINTER(ctypes.c_float)]
        + [c_ptr, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int])
    data_type, one_bits = (14, 0x3F80) if half == "bf16" else (2, 0x3C00)  # CUDA_R_16BF / 16F
    a, c = dev.alloc(n * n * 2), dev.alloc(n * n * 2)
    dev.call("cuMemsetD16_v2", a, one_bits, n * n)
    handle, alpha, beta = c_ptr(), ctypes.c_float(1.0), ctypes.c_float(0.0)
    if blas.cublasCreate_v2(ctypes.byref(handle)) != 0:
        raise CudaError("cublasCreate failed")
    try:
        def gemm():
            status = blas.cublasGemmEx(handle, 0, 0, n, n, n, ctypes.byref(alpha),
                                       c_ptr(a), data_type, n, c_ptr(a), data_type, n,
                                       ctypes.byref(beta), c_ptr(c), data_type, n,
                                       68, -1)  # CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT
            if status != 0:
                raise CudaError("cublasGemmEx failed with status %d" % status)
        ms = dev.time_ms(gemm, iterations)
        raw = dev.read(c, 2)
        check = struct.unpack("<f", b"\0\0" + raw)[0] if half == "bf16" \
            else struct.unpack("<e", raw)[0]
        return ms, check
    finally:
        blas.cublasDestroy_v2(handle)


def check_gemm(expect, gpu, perf):
    """A timed half-precision n x n GEMM on device 0 (framework matmul, else
    cuBLAS); checks ones @ ones == n and reports TFLOPS."""
    dev = gpu["device"]
    frameworks = [f for f in FRAMEWORKS if f in (expect.get("frameworks") or [])]
    if frameworks:
        method, run = frameworks[0], {"torch": _gemm_torch, "jax": _gemm_jax,
                                      "tensorflow": _gemm_tensorflow}[frameworks[0]]
    elif find_library("libcublas"):
        method, run = "cublas", _gemm_cublas
    else:
        return "skip", "no framework and no libcublas in the image: nothing to run a GEMM with"
    half = "bf16" if dev.cc[0] >= 8 else "fp16"
    n, iterations = (8192 if dev.free_bytes() >= 2 * 2**30 else 4096), 20
    ms, check = run(dev, n, iterations, half)
    dev.free_all()
    if check != n:
        return "fail", "%s %s GEMM gave %r for ones @ ones, expected %d" % (method, half, check, n)
    tflops = 2.0 * n ** 3 * iterations / (ms / 1e3) / 1e12
    perf["gemm_tflops"], perf["gemm_method"] = round(tflops, 1), "%s %s" % (method, half)
    target = match_target(expect, dev.name, dev.cc) or {}
    thresholds = dict(DEFAULT_THRESHOLDS, **(expect.get("thresholds") or {}))
    if target.get("peak_fp16_tflops"):
        perf["gemm_fraction"] = round(tflops / float(target["peak_fp16_tflops"]), 3)
    status, detail = _judge(tflops, "TFLOPS", target.get("peak_fp16_tflops"),
                            thresholds["gemm_pass"])
    return status, "%s %s %dx%d: %s" % (method, half, n, n, detail)


# --------------------------------------------------------------------------
# Running everything
# --------------------------------------------------------------------------

def load_expect(path):
    """Read and sanity-check expect.json; raises UsageError (exit 2)."""
    try:
        with open(path) as handle:
            expect = json.load(handle)
    except OSError as exc:
        raise UsageError("cannot read expect file %s: %s" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise UsageError("expect file %s is not valid JSON: %s" % (path, exc))
    if not isinstance(expect, dict):
        raise UsageError("expect file %s must hold a JSON object" % path)
    if expect.get("schema", EXPECT_SCHEMA) != EXPECT_SCHEMA:
        raise UsageError("expect file schema %r is not %r" % (expect.get("schema"), EXPECT_SCHEMA))
    kinds = {"packages": dict, "frameworks": list, "targets": list, "thresholds": dict}
    for key, kind in kinds.items():
        if expect.get(key) is not None and not isinstance(expect[key], kind):
            raise UsageError("expect.%s must be a JSON %s"
                             % (key, "object" if kind is dict else "array"))
    for target in expect.get("targets") or []:
        try:
            parse_cc(target["cc"])
        except (TypeError, KeyError, ValueError):
            raise UsageError("each expect.targets entry needs a 'cc' like \"12.0\": %r" % (target,))
        for key in ("peak_fp16_tflops", "peak_bandwidth_gbs"):
            if not isinstance(target.get(key, 0) or 0, (int, float)):
                raise UsageError("expect.targets[].%s must be a number: %r" % (key, target))
    for key, value in (expect.get("thresholds") or {}).items():
        if not isinstance(value, (int, float)):
            raise UsageError("expect.thresholds.%s must be a number, got %r" % (key, value))
    unknown = [f for f in expect.get("frameworks") or [] if f not in FRAMEWORK_CHECKS]
    if unknown:
        raise UsageError("unknown framework(s) in expect.frameworks: %s" % ", ".join(unknown))
    return expect


def target_arg(text):
    """argparse type for --target: 'sm_120', 'sm_90a' or '12.0'."""
    arch = parse_arch(text)
    if arch and arch[0] == "sm":
        return {"arch": text.lower(), "cc": (arch[1], arch[2]), "label": "from --target"}
    try:
        cc = parse_cc(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected sm_XY (e.g. sm_120) or X.Y, got %r" % text)
    return {"arch": "sm_%d%d" % cc, "cc": cc, "label": "from --target"}


def build_targets(expect, cli_targets, devices):
    """GPUs the stack must support: expect.targets, then --target (replacing an
    entry of the same arch), then the GPUs actually present."""
    targets = []
    for t in expect.get("targets") or []:
        cc = parse_cc(t["cc"])
        targets.append({"arch": "sm_%d%d" % cc, "cc": cc, "label": str(t.get("gpu") or "target")})
    for t in cli_targets:
        targets = [old for old in targets if old["arch"] != t["arch"]] + [t]
    for d in devices:
        cc = parse_cc(d["cc"])
        if not any(t["cc"] == cc for t in targets):
            targets.append({"arch": "sm_%d%d" % cc, "cc": cc, "label": d["name"]})
    return targets


def run_check(name, function, *args):
    """Run one check: time it, and turn any exception into a 'fail' record."""
    begin = time.perf_counter()
    try:
        status, detail = function(*args)
    except Exception as exc:  # never a traceback: the failure is the check's result
        status, detail = "fail", "%s: %s" % (type(exc).__name__, exc)
    return {"name": name, "status": status, "detail": detail,
            "ms": round((time.perf_counter() - begin) * 1e3, 1)}


def run(expect, cli_targets=(), no_gpu=False):
    """Run every check and build the report (a JSON-ready dict)."""
    started, begin = time.gmtime(), time.perf_counter()
    if no_gpu:
        devices, driver, reason = [], None, "skipped: --no-gpu given"
    else:
        try:
            devices, driver, reason = probe_gpus()
        except Exception as exc:
            devices, driver, reason = [], None, "NVML probe failed: %s" % exc
    targets = build_targets(expect, cli_targets, devices)
    checks = [run_check("python", check_python, expect, targets),
              run_check("packages", check_packages, expect, targets)]
    frameworks = expect.get("frameworks") or []
    for name in frameworks:
        checks.append(run_check("framework.%s" % name, FRAMEWORK_CHECKS[name], expect, targets))
    if not frameworks:
        checks.append({"name": "frameworks", "status": "skip", "detail": "none expected", "ms": 0.0})
    for name, function in (("cudart", check_cudart), ("cudnn", check_cudnn),
                           ("nvrtc", check_nvrtc)):
        checks.append(run_check(name, function, expect, targets))
    perf = {"gemm_tflops": None, "bandwidth_gbs": None}
    if devices:
        checks += run_gpu_checks(expect, devices, driver, perf)
    else:
        checks.append({"name": "gpu", "status": "skip", "detail": reason, "ms": 0.0})
    gpu_ran = any(c["name"] in ("gpu.bandwidth", "gpu.gemm") and c["status"] in ("pass", "warn")
                  for c in checks)
    return {"schema": SCHEMA, "status": overall_status(checks, gpu_ran),
            "stack_hash": expect.get("stack_hash"),
            "python": sys.version.split()[0],
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", started),
            "duration_s": round(time.perf_counter() - begin, 3),
            "gpu_available": bool(devices), "gpu_reason": reason,
            "devices": devices, "targets": [t["arch"] for t in targets],
            "checks": checks, "perf": perf}


def run_gpu_checks(expect, devices, driver, perf):
    """The device checks, in order; later ones are skipped if CUDA can't start."""
    gpu = {}
    checks = [run_check("gpu.driver", check_driver, expect, devices, driver),
              run_check("gpu.cuda", check_cuda_device, gpu)]
    if "device" not in gpu:
        for name in ("gpu.bandwidth", "gpu.gemm"):
            checks.append({"name": name, "status": "skip",
                           "detail": "no CUDA context (see gpu.cuda)", "ms": 0.0})
        return checks
    try:
        checks.append(run_check("gpu.bandwidth", check_bandwidth, expect, gpu, perf))
        checks.append(run_check("gpu.gemm", check_gemm, expect, gpu, perf))
    finally:
        with contextlib.suppress(Exception):
            gpu["device"].close()
    return checks


def overall_status(checks, gpu_ran):
    """failed > passed (GPU work really ran) > passed-without-gpu."""
    if any(c["status"] == "fail" for c in checks):
        return "failed"
    return "passed" if gpu_ran else "passed-without-gpu"


def format_human(report):
    """One screen: a line per check, then the overall status."""
    lines = ["cudabox smoke test: stack %s, Python %s"
             % ((report.get("stack_hash") or "?")[:12], report["python"])]
    width = max([len(c["name"]) for c in report["checks"]] + [8])
    for check in report["checks"]:
        detail = " ".join((check["detail"] or "").split())
        if check["status"] in ("fail", "warn"):  # problems in full (up to 4 lines)
            wrapped = textwrap.wrap(detail, 100, break_on_hyphens=False)[:4] or [""]
        else:
            wrapped = [detail if len(detail) <= 100 else detail[:97] + "..."]
        lines.append("  %-4s  %-*s  %s" % (check["status"].upper(), width, check["name"], wrapped[0]))
        lines += [" " * (10 + width) + more for more in wrapped[1:]]
    status = report["status"]
    lines.append("result: %s (exit %d, %.1f s)" % (status, EXIT_CODES[status], report["duration_s"]))
    if status == "passed-without-gpu":
        lines.append("  the stack is consistent, but nothing ran on a GPU: %s" % report["gpu_reason"])
    return "\n".join(lines)


@contextlib.contextmanager
def stdout_to_stderr():
    """Send everything (Python and C libraries alike) written to stdout to
    stderr, so that --json output stays one clean JSON document."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    old, sys.stdout = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout = old


def parse_args(argv):
    parser = argparse.ArgumentParser(description="cudabox smoke test: prove the CUDA stack works.")
    parser.add_argument("--expect", default=DEFAULT_EXPECT, help="expect.json (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON report")
    parser.add_argument("--target", action="append", default=[], type=target_arg, metavar="sm_XY",
                        help="also require this GPU arch (repeatable)")
    parser.add_argument("--no-gpu", action="store_true", help="skip device checks")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)  # exits 2 on bad usage
    try:
        expect = load_expect(args.expect)
    except UsageError as exc:
        print("smoke: %s" % exc, file=sys.stderr)
        if args.json:
            print(json.dumps({"schema": SCHEMA, "status": "error", "error": str(exc)}))
        return EXIT_USAGE
    try:
        if args.json:
            with stdout_to_stderr():
                report = run(expect, args.target, args.no_gpu)
        else:
            report = run(expect, args.target, args.no_gpu)
    except Exception as exc:  # a bug in this script, not in the stack: still no traceback
        report = {"schema": SCHEMA, "status": "failed", "error": "internal error: %r" % exc,
                  "checks": []}
        print(json.dumps(report) if args.json else "smoke: internal error: %r" % exc)
        return EXIT_FAILED
    print(json.dumps(report, indent=2) if args.json else format_human(report))
    return EXIT_CODES[report["status"]]


if __name__ == "__main__":
    sys.exit(main())
