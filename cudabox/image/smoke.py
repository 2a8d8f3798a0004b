"""cudabox smoke test: prove that the CUDA stack inside an image works.

This file is copied into every cudabox image as /opt/cudabox/smoke.py and run
by `cudabox validate` as `python /opt/cudabox/smoke.py --json`.  It must run
on any Python >= 3.8 with the standard library only, so it talks to the CUDA
libraries through ctypes.

    python smoke.py [--expect PATH] [--json] [--target sm_XY]... [--no-gpu]

What it checks (each check gives pass / fail / warn / skip):
  python, packages    the venv holds what cudabox installed
  framework.<name>    torch / tensorflow / jax / paddle / mxnet import and were built for this CUDA
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
FRAMEWORKS = ("torch", "jax", "tensorflow", "paddle")  # also the order tried for the GEMM

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
    """tensorflow is a CUDA build for this CUDA/cuDNN. It finds CUDA by the major's sonames (the image's,
    or the [and-cuda] wheels'), so one built for 11.2 runs on an 11.8 image: same major, same or
    newer minor."""
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
        problems.append(_system_cuda_problem(cuda, expect))
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


def _system_cuda_problem(built_for, expect):
    """A framework that takes CUDA from the image (Paddle 2.x, MXNet) runs on the same major, same or
    newer minor (minor-version compatibility); a problem text otherwise."""
    want, have = version_tuple(expect.get("cuda") or "")[:2], version_tuple(built_for)[:2]
    if want and have and (have[0] != want[0] or have > want):
        return "built for CUDA %s, which CUDA %s does not run" % (built_for, expect["cuda"])
    return None


def check_paddle(expect, targets):
    """paddle imports, is a CUDA build (paddle.version.cuda()/cudnn()) for this CUDA major, and its
    device module answers (0 devices without a GPU)."""
    import paddle
    facts, problems = ["paddle %s" % paddle.__version__], []
    cuda, cudnn = str(paddle.version.cuda()), str(paddle.version.cudnn())
    if not paddle.is_compiled_with_cuda() or cuda in ("False", "", "None"):
        facts.append("not a CUDA build")
        if expect.get("cuda"):
            problems.append("a CPU-only paddle cannot use CUDA %s" % expect["cuda"])
        return _verdict(problems, facts)
    facts.append("CUDA %s" % cuda)
    problems.append(_system_cuda_problem(cuda, expect))
    if cudnn not in ("False", "", "None"):
        facts.append("cuDNN %s" % cudnn)
        want = version_tuple(expect.get("cudnn") or "")
        have = version_tuple(cudnn)
        if want and have and (have[0] != want[0] or have[:3] > want[:3]):
            problems.append("built for cuDNN %s, the image has %s" % (cudnn, expect["cudnn"]))
    facts.append("%d GPU(s) visible" % paddle.device.cuda.device_count())
    return _verdict([p for p in problems if p], facts)


def check_mxnet(expect, targets):
    """mxnet imports and its build has CUDA and cuDNN (mx.runtime.Features)."""
    import mxnet
    facts, problems = ["mxnet %s" % mxnet.__version__], []
    features = mxnet.runtime.Features()
    for name in ("CUDA", "CUDNN"):
        if not features.is_enabled(name):
            problems.append("built without %s" % name)
    facts.append(", ".join("%s %s" % (n, "on" if features.is_enabled(n) else "off") for n in ("CUDA", "CUDNN")))
    return _verdict(problems, facts)


FRAMEWORK_CHECKS = {"torch": check_torch, "tensorflow": check_tensorflow, "jax": check_jax,
                    "paddle": check_paddle, "mxnet": check_mxnet}


CUDA_ERROR_INSUFFICIENT_DRIVER = 35  # cudaErrorInsufficientDriver


def _cudart_without_driver(path, others, expect):
    """CUDA 11 runtimes answer cudaRuntimeGetVersion only with a driver loaded (error 35 without one;
    CUDA 12 ones answer anyway). Without a driver the version comes from the library's real file name
    (libcudart.so.11.8.89 in NVIDIA's images) where it has one; else it is said, not compared."""
    real = os.path.basename(os.path.realpath(path))
    parts = real.split(".so.", 1)[1].split(".") if ".so." in real else []
    where = _where(path, others)
    if len(parts) >= 2 and parts[1] != "0":
        found = "%s.%s" % (parts[0], parts[1])
        if expect.get("cuda") and found != major_minor(expect["cuda"]):
            return "fail", "CUDA runtime is %s (file %s), expected %s" % (found, real, expect["cuda"])
        return "pass", "CUDA runtime %s at %s (from the file name: no driver to ask)" % (found, where)
    return "warn", ("libcudart loads (%s) but, without a driver, this CUDA runtime does not report its version "
                    "(cudaErrorInsufficientDriver) and %s names no minor: expect.cuda %s not compared"
                    % (where, real, expect.get("cuda") or "-"))


def check_cudart(expect, targets):
    """libcudart loads and is the expected CUDA version (no GPU needed)."""
    try:
        lib, path, others = load_library("libcudart")
    except OSError as exc:
        if not expect.get("cuda"):
            return "skip", "no CUDA version expected and no libcudart found"
        return "fail", str(exc)
    value = ctypes.c_int()
    code = lib.cudaRuntimeGetVersion(ctypes.byref(value))
    if code == CUDA_ERROR_INSUFFICIENT_DRIVER and not find_library("libcuda"):
        return _cudart_without_driver(path, others, expect)
    if code != 0:
        return "fail", "cudaRuntimeGetVersion failed (%s, error %d)" % (path, code)
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
        return "skip", "no NVRTC found: %s" % exc
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
        return [], None, "libnvidia-ml.so.1 not found: no NVIDIA driver here (in a container: no GPU or NVIDIA runtime given)"
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
    "cuMemcpyHtoD_v2": [_c.c_uint64, _c.c_void_p, _c.c_size_t],
    "cuDeviceGetPCIBusId": [_c.c_char_p, _c.c_int, _c.c_int],
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

    def write(self, ptr, data):
        """Copy a bytearray to device memory (no extra host copy)."""
        self.call("cuMemcpyHtoD_v2", ptr, (ctypes.c_char * len(data)).from_buffer(data), len(data))

    def pci_bus_id(self):
        """'0000:00:06.0': how NVML finds this CUDA device (indices may differ)."""
        out = ctypes.create_string_buffer(64)
        self.call("cuDeviceGetPCIBusId", out, 64, self.dev)
        return out.value.decode()

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


def check_cuda_device(gpu, options):
    """cuInit and a context on the device work (driver and container agree)."""
    ordinal = options.get("device", 0)
    dev = gpu["device"] = CudaDevice(ordinal)
    return "pass", "CUDA device %d: %s (cc %d.%d)" % (ordinal, dev.name, dev.cc[0], dev.cc[1])


def load_kernels(gpu):
    """Compile KERNELS with NVRTC for device 0's arch and load the module once
    (cached in `gpu`); raises OSError without NVRTC, CudaError on failure."""
    if "module" not in gpu:
        dev = gpu["device"]
        nvrtc = Nvrtc()
        arch = "sm_%d%d" % dev.cc
        try:
            cubin = nvrtc.compile(arch)
        except CudaError as exc:
            raise CudaError("NVRTC %s cannot build kernels for this GPU (%s): %s"
                            % (nvrtc.version, arch, exc))
        module = ctypes.c_void_p()
        dev.call("cuModuleLoadData", ctypes.byref(module), cubin)
        gpu["module"] = module
    return gpu["module"]


def kernel_function(gpu, name):
    function = ctypes.c_void_p()
    gpu["device"].call("cuModuleGetFunction", ctypes.byref(function), load_kernels(gpu),
                       name.encode())
    return function


def check_kernel(expect, gpu, perf, options):
    """An NVRTC-built saxpy runs on the device and computes the right numbers:
    the driver loads code for this GPU and launches it (seconds, no load)."""
    dev = gpu["device"]
    try:
        function = kernel_function(gpu, "saxpy")
    except OSError:
        return "skip", "no NVRTC to build a kernel with"
    n = 1 << 20
    try:
        x, y = ctypes.c_uint64(dev.alloc(4 * n)), ctypes.c_uint64(dev.alloc(4 * n))
        dev.call("cuMemsetD32_v2", x, 0x3F800000, n)  # 1.0f
        dev.call("cuMemsetD32_v2", y, 0x40000000, n)  # 2.0f
        a, count = ctypes.c_float(3.0), ctypes.c_int(n)
        params = (ctypes.c_void_p * 4)(*(ctypes.addressof(v) for v in (a, x, y, count)))
        dev.call("cuLaunchKernel", function, n // 256, 1, 1, 256, 1, 1, 0, None, params, None)
        dev.call("cuCtxSynchronize")
        got = dev.read(y.value, 16) + dev.read(y.value + 4 * n - 16, 16)
    finally:
        dev.free_all()
    if got != struct.pack("<f", 5.0) * 8:
        return "fail", "saxpy on %s computed %r, expected 5.0 everywhere" % (
            dev.name, struct.unpack("<8f", got))
    return "pass", "saxpy (NVRTC, sm_%d%d) ran on %s and computed 3*1+2 = 5" % (
        dev.cc + (dev.name,))


def check_bandwidth(expect, gpu, perf, options):
    """Copy a 256 MiB buffer with an NVRTC-compiled kernel; report GB/s."""
    dev = gpu["device"]
    nbytes = min(256 * 2**20, dev.free_bytes() // 8 // 2**20 * 2**20)  # small MIG slices
    try:
        function = kernel_function(gpu, "copy_f4")
    except OSError:
        return "skip", "no NVRTC to build the copy kernel"
    try:
        src, dst = ctypes.c_uint64(dev.alloc(nbytes)), ctypes.c_uint64(dev.alloc(nbytes))
        count = ctypes.c_uint64(nbytes // 16)
        block = random_half(2**19, "bf16")  # 1 MiB of random data, tiled: quick to make
        for offset in range(0, nbytes, len(block)):
            dev.write(src.value + offset, block[:nbytes - offset])
        dev.call("cuMemsetD32_v2", dst, 0, nbytes // 4)
        params = (ctypes.c_void_p * 3)(ctypes.addressof(src), ctypes.addressof(dst),
                                       ctypes.addressof(count))
        blocks = (count.value + 255) // 256

        def launch():
            dev.call("cuLaunchKernel", function, blocks, 1, 1, 256, 1, 1, 0, None, params, None)

        one = dev.time_ms(launch, 3) / 3.0
        iterations = max(5, min(5000, int(200.0 / max(one, 1e-3))))  # ~0.2 s of copies
        ms = dev.time_ms(launch, iterations, warmup=0)
        for offset in (0, nbytes // 3 // 16 * 16, nbytes - 4096):
            if dev.read(dst.value + offset, 4096) != dev.read(src.value + offset, 4096):
                return "fail", "copy kernel produced wrong data at byte %d" % offset
        gbs = 2 * nbytes * iterations / (ms / 1e3) / 1e9
        perf["bandwidth_gbs"] = round(gbs, 1)
        target = match_target(expect, dev.name, dev.cc) or {}
        thresholds = dict(DEFAULT_THRESHOLDS, **(expect.get("thresholds") or {}))
        if target.get("peak_bandwidth_gbs"):
            perf["bandwidth_fraction"] = round(gbs / float(target["peak_bandwidth_gbs"]), 4)
        status, detail = _judge(gbs, "GB/s", target.get("peak_bandwidth_gbs"),
                                thresholds["bandwidth_pass"])
        return status, "%d MiB device copy x %d: %s" % (nbytes // 2**20, iterations, detail)
    finally:
        dev.free_all()


# GEMM paths. Each measures on random data (constant inputs such as ones
# draw less power and read high: on an H100, ones @ ones timed ~13 % faster
# than random bf16) and checks a few output entries against an fp32 reference.

GEMM_CHECK_ROWS = 16


def _gemm_tolerance(scale, ref):
    """Allowed |error| for one output entry: fp32 accumulation is near-exact;
    the half-precision output (or a reduced-precision split-K reduction) rounds
    at ~2^-8 relative. `scale` is sqrt(sum_k (a_ik * b_kj)^2)."""
    return 2.0 ** -6 * scale + 2.0 ** -7 * abs(ref)


class _TorchGemm:
    def __init__(self, dev, n, half):
        import torch
        self.torch, device = torch, torch.device("cuda", dev.ordinal)
        dtype = torch.bfloat16 if half == "bf16" else torch.float16
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)
        self.c = self.a @ self.b

    def time_ms(self, iterations):
        torch = self.torch
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            self.c = self.a @ self.b
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def verify(self):
        a, b = self.a[:GEMM_CHECK_ROWS].float(), self.b.float()
        ref = a @ b
        scale = ((a * a) @ (b * b)).sqrt()
        err = (self.c[:GEMM_CHECK_ROWS].float() - ref).abs()
        ratio = err / (2.0 ** -6 * scale + 2.0 ** -7 * ref.abs())
        return float(ratio.max().item()), int(ratio.numel())

    def close(self):
        self.a = self.b = self.c = None
        self.torch.cuda.empty_cache()


class _JaxGemm:
    def __init__(self, dev, n, half):
        import jax
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        gpu = jax.devices("gpu")[dev.ordinal]
        dtype = jnp.bfloat16 if half == "bf16" else jnp.float16
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        self.a = jax.device_put(jax.random.normal(ka, (n, n), dtype), gpu)
        self.b = jax.device_put(jax.random.normal(kb, (n, n), dtype), gpu)
        self.matmul = jax.jit(lambda p, q: p @ q)
        self.c = self.matmul(self.a, self.b).block_until_ready()

    def time_ms(self, iterations):
        begin = time.perf_counter()
        for _ in range(iterations):
            self.c = self.matmul(self.a, self.b)
        self.c.block_until_ready()
        return (time.perf_counter() - begin) * 1e3

    def verify(self):
        jnp, highest = self.jnp, self.jax.lax.Precision.HIGHEST
        a, b = self.a[:GEMM_CHECK_ROWS].astype(jnp.float32), self.b.astype(jnp.float32)
        ref = jnp.matmul(a, b, precision=highest)
        scale = jnp.sqrt(jnp.matmul(a * a, b * b, precision=highest))
        err = jnp.abs(self.c[:GEMM_CHECK_ROWS].astype(jnp.float32) - ref)
        ratio = err / (2.0 ** -6 * scale + 2.0 ** -7 * jnp.abs(ref))
        return float(jnp.max(ratio)), int(ratio.size)

    def close(self):
        self.a = self.b = self.c = None


class _PaddleGemm:
    def __init__(self, dev, n, half):
        import paddle
        self.paddle = paddle
        paddle.device.set_device("gpu:%d" % dev.ordinal)
        dtype = "bfloat16" if half == "bf16" else "float16"
        paddle.seed(0)
        self.a = paddle.randn([n, n], dtype="float32").astype(dtype)
        self.b = paddle.randn([n, n], dtype="float32").astype(dtype)
        self.c = paddle.matmul(self.a, self.b)

    def time_ms(self, iterations):
        paddle = self.paddle
        paddle.device.cuda.synchronize()
        begin = time.perf_counter()
        for _ in range(iterations):
            self.c = paddle.matmul(self.a, self.b)
        paddle.device.cuda.synchronize()
        return (time.perf_counter() - begin) * 1e3

    def verify(self):
        paddle = self.paddle
        a, b = self.a[:GEMM_CHECK_ROWS].astype("float32"), self.b.astype("float32")
        ref = paddle.matmul(a, b)
        scale = paddle.sqrt(paddle.matmul(a * a, b * b))
        err = paddle.abs(self.c[:GEMM_CHECK_ROWS].astype("float32") - ref)
        ratio = err / (2.0 ** -6 * scale + 2.0 ** -7 * paddle.abs(ref))
        return float(ratio.max().item()), int(ratio.size)

    def close(self):
        self.a = self.b = self.c = None
        with contextlib.suppress(Exception):
            self.paddle.device.cuda.empty_cache()


class _TensorflowGemm:
    def __init__(self, dev, n, half):
        import tensorflow as tf
        self.tf, self.where = tf, "/GPU:%d" % dev.ordinal
        dtype = tf.bfloat16 if half == "bf16" else tf.float16
        with tf.device(self.where):
            self.a = tf.cast(tf.random.normal((n, n), seed=1), dtype)
            self.b = tf.cast(tf.random.normal((n, n), seed=2), dtype)
            self.c = tf.linalg.matmul(self.a, self.b)

    def time_ms(self, iterations):
        tf = self.tf
        with tf.device(self.where):
            begin = time.perf_counter()
            for _ in range(iterations):
                self.c = tf.linalg.matmul(self.a, self.b)
            float(self.c[0, 0].numpy())  # waits for the queue
        return (time.perf_counter() - begin) * 1e3

    def verify(self):
        tf = self.tf
        with tf.device(self.where):
            a, b = tf.cast(self.a[:GEMM_CHECK_ROWS], tf.float32), tf.cast(self.b, tf.float32)
            ref = tf.linalg.matmul(a, b)  # TF32 is exact for half-precision inputs
            scale = tf.sqrt(tf.linalg.matmul(a * a, b * b))
            err = tf.abs(tf.cast(self.c[:GEMM_CHECK_ROWS], tf.float32) - ref)
            ratio = err / (2.0 ** -6 * scale + 2.0 ** -7 * tf.abs(ref))
            return float(tf.reduce_max(ratio).numpy()), int(tf.size(ratio).numpy())

    def close(self):
        self.a = self.b = self.c = None


_HIGH_BYTE = {  # sign kept, exponent pinned: random finite values in +-[0.5, 2)
    "bf16": bytes((b & 0x80) | 0x3F for b in range(256)),
    "fp16": bytes((b & 0x83) | 0x38 for b in range(256)),
}


def random_half(count, half):
    """`count` random finite bf16/fp16 values as little-endian bytes, without
    numpy: random bits whose high byte's exponent bits are pinned."""
    raw = bytearray(os.urandom(2 * count))
    raw[1::2] = raw[1::2].translate(_HIGH_BYTE[half])
    return raw


def half_to_float(bits, half):
    """One bf16/fp16 value (as a 16-bit integer) -> float."""
    if half == "bf16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    return struct.unpack("<e", struct.pack("<H", bits))[0]


class _CublasGemm:
    """cublasGemmEx on driver-API buffers holding random host-made data (no
    framework and no NVRTC needed)."""

    def __init__(self, dev, n, half):
        self.dev, self.n, self.half = dev, n, half
        blas = self.blas = load_library("libcublas")[0]
        c_ptr = ctypes.c_void_p
        blas.cublasCreate_v2.argtypes = [ctypes.POINTER(c_ptr)]
        blas.cublasDestroy_v2.argtypes = [c_ptr]
        blas.cublasGemmEx.argtypes = (
            [c_ptr] + [ctypes.c_int] * 5 + [ctypes.POINTER(ctypes.c_float)]
            + [c_ptr, ctypes.c_int, ctypes.c_int] * 2 + [ctypes.POINTER(ctypes.c_float)]
            + [c_ptr, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int])
        self.host_a, self.host_b = random_half(n * n, half), random_half(n * n, half)
        self.a, self.b, self.c = (dev.alloc(n * n * 2) for _ in range(3))
        dev.write(self.a, self.host_a)
        dev.write(self.b, self.host_b)
        self.handle, self.alpha, self.beta = c_ptr(), ctypes.c_float(1.0), ctypes.c_float(0.0)
        if blas.cublasCreate_v2(ctypes.byref(self.handle)) != 0:
            raise CudaError("cublasCreate failed")
        self.gemm()

    def gemm(self):
        data_type, n, c_ptr = (14 if self.half == "bf16" else 2), self.n, ctypes.c_void_p
        status = self.blas.cublasGemmEx(  # CUDA_R_16BF / CUDA_R_16F, column-major C = A B
            self.handle, 0, 0, n, n, n, ctypes.byref(self.alpha),
            c_ptr(self.a), data_type, n, c_ptr(self.b), data_type, n,
            ctypes.byref(self.beta), c_ptr(self.c), data_type, n,
            68, -1)  # CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT
        if status != 0:
            raise CudaError("cublasGemmEx failed with status %d" % status)

    def time_ms(self, iterations):
        return self.dev.time_ms(self.gemm, iterations, warmup=0)

    def verify(self):
        """Recompute GEMM_CHECK_ROWS entries on the host from the uploaded data."""
        n, half = self.n, self.half
        a, b = memoryview(self.host_a).cast("H"), memoryview(self.host_b).cast("H")
        worst, rng = 0.0, __import__("random").Random(n)
        for _ in range(GEMM_CHECK_ROWS):
            i, j = rng.randrange(n), rng.randrange(n)
            got = half_to_float(struct.unpack("<H", self.dev.read(self.c + 2 * (i + j * n), 2))[0], half)
            ref = scale = 0.0
            for k in range(n):  # column-major: A[i, k] = a[i + k n], B[k, j] = b[k + j n]
                term = half_to_float(a[i + k * n], half) * half_to_float(b[k + j * n], half)
                ref += term
                scale += term * term
            if got != got:  # NaN
                return float("inf"), GEMM_CHECK_ROWS
            worst = max(worst, abs(got - ref) / _gemm_tolerance(scale ** 0.5, ref))
        return worst, GEMM_CHECK_ROWS

    def close(self):
        self.blas.cublasDestroy_v2(self.handle)
        self.dev.free_all()


GEMM_PATHS = {"torch": _TorchGemm, "jax": _JaxGemm, "tensorflow": _TensorflowGemm,
              "paddle": _PaddleGemm, "cublas": _CublasGemm}


def choose_gemm(expect):
    """The GEMM path: the first expected framework, else cuBLAS, else None."""
    frameworks = [f for f in FRAMEWORKS if f in (expect.get("frameworks") or [])]
    if frameworks:
        return frameworks[0]
    return "cublas" if find_library("libcublas") else None


def gemm_size(dev, requested=None):
    """8192 (4096 with under 2 GiB free), or --gemm-size."""
    if requested:
        return requested
    return 8192 if dev.free_bytes() >= 2 * 2**30 else 4096


def calibrated_iterations(gemm, seconds):
    """Iterations that take about `seconds` (after two warm-up runs), so the
    figure is a steady-state rate, not a boost-clock burst."""
    gemm.time_ms(2)
    one = max(gemm.time_ms(3) / 3.0, 1e-3)
    return max(3, min(10000, int(seconds * 1e3 / one)))


def check_gemm(expect, gpu, perf, options):
    """A timed half-precision n x n GEMM on random data (framework matmul,
    else cuBLAS); checks output entries against an fp32 reference; TFLOPS."""
    dev = gpu["device"]
    method = choose_gemm(expect)
    if method is None:
        return "skip", "no framework and no libcublas found: nothing to run a GEMM with"
    half = "bf16" if dev.cc[0] >= 8 else "fp16"
    n = gpu["gemm_n"] = gemm_size(dev, options.get("gemm_size"))
    gemm = GEMM_PATHS[method](dev, n, half)
    try:
        iterations = calibrated_iterations(gemm, 0.3)
        ms = gemm.time_ms(iterations)
        worst, entries = gemm.verify()
        if options.get("sustained_s"):
            gpu["sustained_gemm"] = gemm
            gemm = None  # closed by the sustained check
    finally:
        if gemm is not None:
            gemm.close()
            dev.free_all()
    perf["gemm_check"] = "%d entries vs fp32 reference, worst error %.2f of tolerance" % (
        entries, worst)
    if not worst <= 1.0:
        gpu.pop("sustained_gemm", None)
        return "fail", "%s %s GEMM %dx%d gave wrong results: worst entry off by %.1fx the " \
            "tolerance (%d entries checked against an fp32 reference)" % (method, half, n, n,
                                                                          worst, entries)
    tflops = 2.0 * n ** 3 * iterations / (ms / 1e3) / 1e12
    perf["gemm_tflops"], perf["gemm_method"] = round(tflops, 1), "%s %s" % (method, half)
    perf["gemm_size"] = n
    target = match_target(expect, dev.name, dev.cc) or {}
    thresholds = dict(DEFAULT_THRESHOLDS, **(expect.get("thresholds") or {}))
    if target.get("peak_fp16_tflops"):
        perf["gemm_fraction"] = round(tflops / float(target["peak_fp16_tflops"]), 4)
    status, detail = _judge(tflops, "TFLOPS", target.get("peak_fp16_tflops"),
                            thresholds["gemm_pass"])
    return status, "%s %s %dx%d random data, results checked: %s" % (method, half, n, n, detail)


# --------------------------------------------------------------------------
# Sustained load (level 3): the GEMM for a while, watched through NVML
# --------------------------------------------------------------------------

CLOCK_EVENT_REASONS = {  # nvmlClocksEventReasons bits (nvml.h)
    0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clocks",
}
# Reasons that mean the board could not hold its clocks for health reasons (a
# power cap under a full GEMM is normal and only reported).
BAD_CLOCK_REASONS = 0x8 | 0x20 | 0x40 | 0x80
NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_TIMEOUT = 3, 10
XID_CRITICAL_EVENT = 0x8


class _NvmlEventData(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong),
                ("eventData", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


class Telemetry:
    """One GPU's health counters through NVML, found by PCI bus id. Every
    reading is None where the driver or the container doesn't support it."""

    def __init__(self, pci_bus_id):
        self.lib = _load_nvml()
        if self.lib is None:
            raise OSError("libnvidia-ml.so.1 not found")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        self.handle = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(),
                                                     ctypes.byref(self.handle)) != 0:
            self.lib.nvmlShutdown()
            raise OSError("NVML does not know the GPU at %s" % pci_bus_id)
        self.events = None

    def _uint(self, function, *args, kind=ctypes.c_uint):
        value = kind()
        call = getattr(self.lib, function, None)
        if call is None or call(self.handle, *(args + (ctypes.byref(value),))) != 0:
            return None
        return value.value

    def sample(self):
        reasons = self._uint("nvmlDeviceGetCurrentClocksEventReasons", kind=ctypes.c_ulonglong)
        if reasons is None:
            reasons = self._uint("nvmlDeviceGetCurrentClocksThrottleReasons",
                                 kind=ctypes.c_ulonglong)
        power = self._uint("nvmlDeviceGetPowerUsage")
        return {"sm_clock_mhz": self._uint("nvmlDeviceGetClockInfo", ctypes.c_int(1)),
                "temperature_c": self._uint("nvmlDeviceGetTemperature", ctypes.c_int(0)),
                "power_w": None if power is None else round(power / 1000.0, 1),
                "reasons": reasons}

    def max_sm_clock(self):
        return self._uint("nvmlDeviceGetMaxClockInfo", ctypes.c_int(1))

    def ecc_uncorrected(self):
        """Volatile (since boot) uncorrected ECC errors, or None (no ECC)."""
        return self._uint("nvmlDeviceGetTotalEccErrors", ctypes.c_int(1), ctypes.c_int(0),
                          kind=ctypes.c_ulonglong)

    def remapped_rows(self):
        """(correctable, uncorrectable, pending, failure) or None (pre-Ampere)."""
        values = [ctypes.c_uint() for _ in range(4)]
        call = getattr(self.lib, "nvmlDeviceGetRemappedRows", None)
        if call is None or call(self.handle, *(ctypes.byref(v) for v in values)) != 0:
            return None
        return tuple(v.value for v in values)

    def watch_xids(self):
        """Start collecting critical XID events; returns why not, or None."""
        events = ctypes.c_void_p()
        if self.lib.nvmlEventSetCreate(ctypes.byref(events)) != 0:
            return "nvmlEventSetCreate failed"
        result = self.lib.nvmlDeviceRegisterEvents(self.handle, ctypes.c_ulonglong(XID_CRITICAL_EVENT),
                                                   events)
        if result != 0:
            self.lib.nvmlEventSetFree(events)
            return "XID events not supported here (NVML error %d)" % result
        self.events = events
        return None

    def xids(self):
        """XID codes reported since watch_xids()."""
        found, data = [], _NvmlEventData()
        while self.events is not None:
            wait = getattr(self.lib, "nvmlEventSetWait_v2", None) or self.lib.nvmlEventSetWait
            if wait(self.events, ctypes.byref(data), ctypes.c_uint(0)) != 0:
                break
            found.append(int(data.eventData))
        return found

    def close(self):
        if self.events is not None:
            self.lib.nvmlEventSetFree(self.events)
        self.lib.nvmlShutdown()


def reason_names(bits):
    return [name for bit, name in sorted(CLOCK_EVENT_REASONS.items()) if bits & bit]


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def judge_sustained(summary):
    """(status, problems) for a sustained run: broken hardware fails, a GPU
    that can't hold its clocks or its rate warns."""
    fail, warn = [], []
    if not summary["results_ok"]:
        fail.append("the GEMM gave wrong results after %.0f s under load" % summary["seconds"])
    if summary.get("ecc_uncorrected_new"):
        fail.append("%d new uncorrectable ECC errors" % summary["ecc_uncorrected_new"])
    rows = summary.get("remapped_rows") or {}
    if rows.get("failure"):
        fail.append("row remapping failed (the GPU needs service)")
    elif rows.get("pending"):
        warn.append("row remapping pending (reset the GPU)")
    if summary.get("xids"):
        fail.append("critical XID events %s" % ", ".join(str(x) for x in summary["xids"]))
    bad = [r for r in summary.get("clock_event_reasons") or []
           if r in {CLOCK_EVENT_REASONS[b] for b in CLOCK_EVENT_REASONS if b & BAD_CLOCK_REASONS}]
    if bad:
        warn.append("clocks held down by %s" % ", ".join(bad))
    rates = summary["tflops"]
    if rates["min"] < 0.85 * rates["median"]:
        warn.append("throughput dropped to %.0f%% of its median" % (100 * rates["min"] / rates["median"]))
    if fail:
        return "fail", fail + warn
    return ("warn" if warn else "pass"), warn


def check_sustained(expect, gpu, perf, options):
    """The GEMM for `--duration` seconds in ~0.5 s chunks, sampling clocks,
    temperature and power after each; ECC, row remapping and XIDs before and after."""
    gemm, dev = gpu.pop("sustained_gemm", None), gpu["device"]
    if gemm is None:
        return "skip", "no GEMM to sustain (see gpu.gemm)"
    seconds, n = float(options["sustained_s"]), gpu["gemm_n"]
    notes, telemetry = [], None
    try:
        telemetry = Telemetry(dev.pci_bus_id())
    except (OSError, CudaError) as exc:
        notes.append("no NVML telemetry: %s" % exc)
    try:
        before_ecc = telemetry.ecc_uncorrected() if telemetry else None
        xid_note = telemetry.watch_xids() if telemetry else None
        if xid_note:
            notes.append(xid_note)
        chunk = calibrated_iterations(gemm, 0.5)
        rates, samples, end = [], [], time.monotonic() + seconds
        while time.monotonic() < end:
            ms = gemm.time_ms(chunk)
            rates.append(2.0 * n ** 3 * chunk / (ms / 1e3) / 1e12)
            if telemetry:
                samples.append(telemetry.sample())
        worst, _ = gemm.verify()
        summary = {"seconds": seconds, "chunks": len(rates), "results_ok": worst <= 1.0,
                   "tflops": {"min": round(min(rates), 1), "median": round(_median(rates), 1),
                              "max": round(max(rates), 1)}}
        if telemetry:
            clocks = [s["sm_clock_mhz"] for s in samples if s["sm_clock_mhz"] is not None]
            temps = [s["temperature_c"] for s in samples if s["temperature_c"] is not None]
            power = [s["power_w"] for s in samples if s["power_w"] is not None]
            reasons = 0
            for s in samples:
                reasons |= s["reasons"] or 0
            after_ecc, rows = telemetry.ecc_uncorrected(), telemetry.remapped_rows()
            summary.update({
                "sm_clock_mhz": {"min": min(clocks), "median": _median(clocks), "max": max(clocks),
                                 "max_supported": telemetry.max_sm_clock()} if clocks else None,
                "temperature_c_max": max(temps) if temps else None,
                "power_w_max": max(power) if power else None,
                "clock_event_reasons": reason_names(reasons),
                "ecc_uncorrected_new": (after_ecc - before_ecc)
                if None not in (after_ecc, before_ecc) else None,
                "remapped_rows": dict(zip(("correctable", "uncorrectable", "pending", "failure"),
                                          rows)) if rows else None,
                "xids": telemetry.xids() if telemetry.events is not None else None})
    finally:
        gemm.close()
        dev.free_all()
        if telemetry:
            telemetry.close()
    perf["sustained"] = summary
    status, problems = judge_sustained(summary)
    rates = summary["tflops"]
    detail = "%.0f s, %d chunks: %.1f / %.1f / %.1f TFLOPS (min/median/max)" % (
        seconds, summary["chunks"], rates["min"], rates["median"], rates["max"])
    clocks = summary.get("sm_clock_mhz")
    if clocks:
        detail += "; SM clock %d-%d MHz (max %s)" % (clocks["min"], clocks["max"],
                                                      clocks["max_supported"])
    if summary.get("temperature_c_max") is not None:
        detail += "; up to %d C" % summary["temperature_c_max"]
    if summary.get("power_w_max") is not None:
        detail += ", %.0f W" % summary["power_w_max"]
    if summary.get("clock_event_reasons"):
        detail += "; clock reasons: %s" % ", ".join(summary["clock_event_reasons"])
    return status, "; ".join(problems + [detail] + notes)


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


def run(expect, cli_targets=(), no_gpu=False, level=2, options=None):
    """Run every check and build the report (a JSON-ready dict).

    level 1 (quick): everything without a GPU, then driver, context and one
    kernel; 2 (default): + bandwidth and GEMM; 3: + a sustained GEMM watched
    through NVML. options: device (CUDA ordinal), gemm_size, sustained_s."""
    options = dict(options or {})
    if level >= 3:
        options.setdefault("sustained_s", 30.0)
    else:
        options.pop("sustained_s", None)
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
        checks += run_gpu_checks(expect, devices, driver, perf, level, options)
    else:
        checks.append({"name": "gpu", "status": "skip", "detail": reason, "ms": 0.0})
    gpu_ran = any(c["name"] in GPU_WORK and c["status"] in ("pass", "warn") for c in checks)
    return {"schema": SCHEMA, "status": overall_status(checks, gpu_ran), "level": level,
            "stack_hash": expect.get("stack_hash"),
            "python": sys.version.split()[0],
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", started),
            "duration_s": round(time.perf_counter() - begin, 3),
            "gpu_available": bool(devices), "gpu_reason": reason,
            "devices": devices, "targets": [t["arch"] for t in targets],
            "checks": checks, "perf": perf}


GPU_CHECKS = (  # (name, function, lowest level that runs it)
    ("gpu.kernel", check_kernel, 1),
    ("gpu.bandwidth", check_bandwidth, 2),
    ("gpu.gemm", check_gemm, 2),
    ("gpu.sustained", check_sustained, 3),
)
GPU_WORK = {name for name, _, _ in GPU_CHECKS}  # a pass of one of these is a GPU pass


def run_gpu_checks(expect, devices, driver, perf, level=2, options=None):
    """The device checks of this level, in order; the later ones are skipped
    if CUDA can't start."""
    gpu, options = {}, options or {}
    checks = [run_check("gpu.driver", check_driver, expect, devices, driver),
              run_check("gpu.cuda", check_cuda_device, gpu, options)]
    wanted = [(name, function) for name, function, lowest in GPU_CHECKS if level >= lowest]
    if "device" not in gpu:
        return checks + [{"name": name, "status": "skip",
                          "detail": "no CUDA context (see gpu.cuda)", "ms": 0.0}
                         for name, _ in wanted]
    try:
        for name, function in wanted:
            checks.append(run_check(name, function, expect, gpu, perf, options))
    finally:
        with contextlib.suppress(Exception):
            leftover = gpu.pop("sustained_gemm", None)
            if leftover is not None:
                leftover.close()
        with contextlib.suppress(Exception):
            if "module" in gpu:
                gpu["device"].lib.cuModuleUnload(gpu["module"])
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
    parser.add_argument("--level", type=level_arg, default=2, metavar="1|2|3",
                        help="1 quick (driver, context, a kernel), 2 (default) + bandwidth and "
                             "GEMM, 3 + a sustained GEMM watched through NVML; also quick/"
                             "standard/long")
    parser.add_argument("--duration", type=float, default=30.0, metavar="SECONDS",
                        help="length of the level-3 sustained run (default %(default)s)")
    parser.add_argument("--device", type=int, default=0, metavar="N",
                        help="CUDA device ordinal for the device checks (default 0)")
    parser.add_argument("--gemm-size", type=int, default=None, metavar="N",
                        help="GEMM size (default 8192; 4096 with under 2 GiB free)")
    args = parser.parse_args(argv)
    if args.duration <= 0 or (args.gemm_size is not None and args.gemm_size < 16) or args.device < 0:
        parser.error("--duration must be > 0, --gemm-size >= 16, --device >= 0")
    return args


LEVEL_NAMES = {"quick": 1, "standard": 2, "long": 3}


def level_arg(text):
    """argparse type for --level: 1, 2, 3 or quick / standard / long."""
    value = LEVEL_NAMES.get(str(text).strip().lower(), str(text).strip())
    if str(value) not in ("1", "2", "3"):
        raise argparse.ArgumentTypeError("expected 1, 2, 3, quick, standard or long, got %r" % text)
    return int(value)


def main(argv=None):
    args = parse_args(argv)  # exits 2 on bad usage
    try:
        expect = load_expect(args.expect)
    except UsageError as exc:
        print("smoke: %s" % exc, file=sys.stderr)
        if args.json:
            print(json.dumps({"schema": SCHEMA, "status": "error", "error": str(exc)}))
        return EXIT_USAGE
    options = {"device": args.device, "gemm_size": args.gemm_size, "sustained_s": args.duration}
    try:
        if args.json:
            with stdout_to_stderr():
                report = run(expect, args.target, args.no_gpu, args.level, options)
        else:
            report = run(expect, args.target, args.no_gpu, args.level, options)
    except Exception as exc:  # a bug in this script, not in the stack: still no traceback
        report = {"schema": SCHEMA, "status": "failed", "error": "internal error: %r" % exc,
                  "checks": []}
        print(json.dumps(report) if args.json else "smoke: internal error: %r" % exc)
        return EXIT_FAILED
    print(json.dumps(report, indent=2) if args.json else format_human(report))
    return EXIT_CODES[report["status"]]


if __name__ == "__main__":
    sys.exit(main())
