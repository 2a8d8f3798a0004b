"""SAXPY with NVRTC: compile a CUDA kernel at run time, and run it when a GPU is there.

Only standard NVIDIA APIs through ctypes: NVRTC (from the nvidia-cuda-nvrtc wheel)
to compile, the CUDA driver API (libcuda, from the host driver) to run.
"""

import ctypes
import glob
import os
import site
import sys

KERNEL = rb"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def load(pattern):
    for base in site.getsitepackages() + ["/usr/local/cuda/lib64"]:
        for path in sorted(glob.glob(os.path.join(base, "**", pattern), recursive=True)):
            return ctypes.CDLL(path)
    return ctypes.CDLL(pattern.replace("*", ""))  # fall back to the loader path


def compile_ptx(arch):
    nvrtc = load("libnvrtc.so.1*")
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), KERNEL, b"saxpy.cu", 0, None, None) == 0
    opt = f"--gpu-architecture={arch}".encode()
    status = nvrtc.nvrtcCompileProgram(prog, 1, (ctypes.c_char_p * 1)(opt))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if status != 0:
        sys.exit(f"NVRTC could not compile for {arch}: {log.value.decode(errors='replace')}")
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(prog, ptx)
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return ptx.raw, f"{major.value}.{minor.value}"


def run_on_gpu(ptx, n):
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    ctx, mod, fn = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    count = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return None
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cuda.cuCtxSetCurrent(ctx)
    assert cuda.cuModuleLoadData(ctypes.byref(mod), ptx) == 0
    cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"saxpy")
    nbytes = n * 4
    x, y = ctypes.c_uint64(), ctypes.c_uint64()
    cuda.cuMemAlloc_v2(ctypes.byref(x), ctypes.c_size_t(nbytes))
    cuda.cuMemAlloc_v2(ctypes.byref(y), ctypes.c_size_t(nbytes))
    hx = (ctypes.c_float * n)(*([1.0] * n))
    hy = (ctypes.c_float * n)(*([2.0] * n))
    cuda.cuMemcpyHtoD_v2(x, hx, ctypes.c_size_t(nbytes))
    cuda.cuMemcpyHtoD_v2(y, hy, ctypes.c_size_t(nbytes))
    a, nn = ctypes.c_float(3.0), ctypes.c_int(n)
    args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in (a, x, y, nn)])
    assert cuda.cuLaunchKernel(fn, (n + 255) // 256, 1, 1, 256, 1, 1, 0, None, args, None) == 0
    cuda.cuMemcpyDtoH_v2(hy, y, ctypes.c_size_t(nbytes))
    return hy[0], hy[n - 1]


def main():
    n = int(os.environ.get("SAXPY_N", "1024"))
    arch = sys.argv[1] if len(sys.argv) > 1 else "compute_80"
    ptx, version = compile_ptx(arch)
    print(f"NVRTC {version} compiled saxpy for {arch}: {len(ptx)} bytes of PTX")
    result = run_on_gpu(ptx, n)
    if result is None:
        print("no GPU visible: compiled only (run with --gpus on a GPU host to execute)")
    else:
        print(f"ran on the GPU: y[0]={result[0]} y[n-1]={result[1]} (expected 5.0)")


if __name__ == "__main__":
    main()
