"""The smoke test's GPU code paths, run against a stand-in for the NVIDIA driver,
NVML and cuBLAS (tests/fixtures/gpu_standin/standin.c, built here with gcc).

The stand-in computes what the GPU would (saxpy, the copy kernel, a real
column-major GEMM on the CPU) and simulates time from configured rates, so
these tests check the smoke test's arithmetic (bytes read + written, 2 n^3
flops), its numerical verification, its levels and its health judgements -
everything up to the silicon. NVRTC is real (NVIDIA's wheels, as in
test_smoke.py). A real GPU run is in bench/gpu/ and bench/results/.
"""
import hashlib
import json
import os
import shutil
import subprocess

import pytest

from tests.test_smoke import ARTIFACTS, SMOKE, STACKS, _build_venv

SOURCE = os.path.join(os.path.dirname(__file__), "fixtures", "gpu_standin", "standin.c")
pytestmark = pytest.mark.network  # the NVRTC wheels come from PyPI (cached after the first run)


@pytest.fixture(scope="module")
def standin():
    """The three stand-in libraries, built once per source version."""
    if not shutil.which("gcc"):
        pytest.fail("gcc is needed to build the GPU stand-in (apt-get install gcc)")
    digest = hashlib.sha256(open(SOURCE, "rb").read()).hexdigest()[:12]
    lib = ARTIFACTS / ("gpu-standin-" + digest)
    if not (lib / "libcublas.so.12").exists():
        work = ARTIFACTS / ("gpu-standin-%s.tmp%d" % (digest, os.getpid()))
        work.mkdir(parents=True, exist_ok=True)
        gcc = ["gcc", "-O2", "-shared", "-fPIC"]
        subprocess.run(gcc + ["-Wl,-soname,libcuda.so.1", "-o", str(work / "libcuda.so.1"), SOURCE],
                       check=True)
        shutil.copy(work / "libcuda.so.1", work / "libnvidia-ml.so.1")
        subprocess.run(gcc + ["-DSTANDIN_CUBLAS", "-o", str(work / "libcublas.so.12"), SOURCE,
                              "-L", str(work), "-l:libcuda.so.1", "-Wl,-rpath,$ORIGIN"], check=True)
        try:
            os.rename(work, lib)
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    return lib


@pytest.fixture(scope="module")
def nvrtc_venvs():
    return {cuda: _build_venv(reqs) for cuda, reqs in STACKS.items()}


PEAKS = {"gpu": "Stand-in GPU", "cc": "9.0", "peak_fp16_tflops": 6.0, "peak_bandwidth_gbs": 12.0}


def smoke(python, lib, tmp_path, *args, expect=None, **standin_env):
    """Run smoke.py --json against the stand-in; returns (exit code, report, checks by name)."""
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(dict({"schema": "cudabox.expect/v1", "targets": [PEAKS]},
                                    **(expect or {}))))
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib), STANDIN_NAME="Stand-in GPU",
               STANDIN_FREE_MIB="64", STANDIN_BANDWIDTH_GBS="10", STANDIN_TFLOPS="5")
    env.update({k.upper(): str(v) for k, v in standin_env.items()})
    proc = subprocess.run([str(python), str(SMOKE), "--expect", str(path), "--json",
                           "--gemm-size", "16"] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          timeout=120)
    report = json.loads(proc.stdout)
    return proc.returncode, report, {c["name"]: c for c in report["checks"]}


def test_measured_figures_are_the_standins_rates(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path)
    assert (code, report["status"], report["level"]) == (0, "passed", 2), checks
    for name in ("gpu.driver", "gpu.cuda", "gpu.kernel", "gpu.bandwidth", "gpu.gemm"):
        assert checks[name]["status"] == "pass", checks[name]
    # bytes read + written per second, and 2 n^3 flops per second, exactly as simulated
    assert report["perf"]["bandwidth_gbs"] == pytest.approx(10.0, rel=0.01)
    assert report["perf"]["gemm_tflops"] == pytest.approx(5.0, rel=0.01)
    assert report["perf"]["bandwidth_fraction"] == pytest.approx(10 / 12, abs=0.01)
    assert report["perf"]["gemm_method"] == "cublas bf16" and report["perf"]["gemm_size"] == 16
    assert "random data, results checked" in checks["gpu.gemm"]["detail"]
    assert report["perf"]["gemm_check"].startswith("16 entries vs fp32 reference")
    assert "gpu.sustained" not in checks


def test_gemm_inputs_are_random_not_constant(nvrtc_venvs, standin, tmp_path):
    # Constant inputs (ones @ ones) draw less power and read high: on an H100
    # they timed ~13 % faster than random bf16 data.
    log = tmp_path / "gemm.log"
    smoke(nvrtc_venvs["12.8"], standin, tmp_path, standin_log=log)
    lines = log.read_text().split()
    distinct = [int(word.split("=")[1]) for word in lines if word.startswith("distinct_a=")]
    assert distinct and min(distinct) > 64  # of 256 entries in a 16x16 A


def test_wrong_gemm_results_fail(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path, standin_wrong_gemm=1)
    assert (code, report["status"]) == (1, "failed")
    assert checks["gpu.gemm"]["status"] == "fail"
    assert "gave wrong results" in checks["gpu.gemm"]["detail"]
    assert report["perf"]["gemm_tflops"] is None


def test_a_kernel_that_computes_wrong_numbers_fails(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path, "--level", "quick",
                                 standin_wrong_kernel=1)
    assert (code, checks["gpu.kernel"]["status"]) == (1, "fail")
    assert "expected 5.0 everywhere" in checks["gpu.kernel"]["detail"]


def test_quick_level_launches_one_kernel_and_measures_nothing(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path, "--level", "1")
    assert (code, report["status"], report["level"]) == (0, "passed", 1)
    assert [n for n in checks if n.startswith("gpu.")] == ["gpu.driver", "gpu.cuda", "gpu.kernel"]
    assert report["perf"]["gemm_tflops"] is None and report["perf"]["bandwidth_gbs"] is None


def test_long_level_sustains_the_gemm_and_reads_telemetry(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path, "--level", "long",
                                 "--duration", "1")
    assert (code, report["status"], report["level"]) == (0, "passed", 3), checks
    sustained = report["perf"]["sustained"]
    assert checks["gpu.sustained"]["status"] == "pass"
    assert sustained["chunks"] >= 1 and sustained["results_ok"] is True
    assert sustained["tflops"]["median"] == pytest.approx(5.0, rel=0.01)
    assert sustained["sm_clock_mhz"]["max_supported"] == 1980
    assert sustained["clock_event_reasons"] == ["sw_power_cap"]  # reported, not judged
    assert sustained["ecc_uncorrected_new"] == 0 and sustained["xids"] == []


@pytest.mark.parametrize("env, status, message", [
    ({"standin_ecc_step": 1}, "fail", "new uncorrectable ECC errors"),
    ({"standin_xid": 79}, "fail", "critical XID events 79"),
    ({"standin_clock_reasons": "0x40"}, "warn", "clocks held down by hw_thermal_slowdown"),
])
def test_sustained_run_judges_the_boards_health(nvrtc_venvs, standin, tmp_path, env, status, message):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path, "--level", "3",
                                 "--duration", "0.5", **env)
    assert checks["gpu.sustained"]["status"] == status
    assert message in checks["gpu.sustained"]["detail"]
    assert code == (1 if status == "fail" else 0)


def test_a_driver_older_than_expected_fails(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path,
                                 expect={"min_driver": "999.0"})
    assert code == 1 and checks["gpu.driver"]["status"] == "fail"
    assert "driver 580.95.05 is older than the required 999.0" in checks["gpu.driver"]["detail"]


def test_a_toolkit_too_old_for_the_gpu_fails_to_build_kernels(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.4"], standin, tmp_path, "--level", "1",
                                 standin_cc="12.0", expect={"targets": []})
    assert code == 1
    assert "NVRTC 12.4 cannot compile for sm_120" in checks["nvrtc"]["detail"]
    assert checks["gpu.kernel"]["status"] == "fail"
    assert "NVRTC 12.4 cannot build kernels for this GPU (sm_120)" in checks["gpu.kernel"]["detail"]


def test_a_device_cuda_cannot_open_skips_the_device_work(nvrtc_venvs, standin, tmp_path):
    code, report, checks = smoke(nvrtc_venvs["12.8"], standin, tmp_path, "--device", "3")
    assert code == 1 and checks["gpu.cuda"]["status"] == "fail"
    assert "invalid device ordinal" in checks["gpu.cuda"]["detail"]
    assert checks["gpu.gemm"] == {"name": "gpu.gemm", "status": "skip",
                                  "detail": "no CUDA context (see gpu.cuda)", "ms": 0.0}


def test_bad_level_and_sizes_are_usage_errors(nvrtc_venvs, tmp_path):
    for args in (["--level", "4"], ["--duration", "0"], ["--gemm-size", "8"]):
        proc = subprocess.run([str(nvrtc_venvs["12.8"]), str(SMOKE)] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 2 and "error" in proc.stderr
