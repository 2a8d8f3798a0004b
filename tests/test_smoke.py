"""Tests for cudabox/smoke.py, the smoke test that runs inside every image.

Two kinds:
  * unit tests of the pure helpers (arch coverage, version matching, ...),
    importing cudabox.smoke directly;
  * end-to-end runs of smoke.py as a subprocess inside real venvs that hold
    NVIDIA's CUDA runtime + NVRTC wheels from PyPI (12.4 and 12.8). The
    libraries are real; only the GPU is missing (this machine has none), so
    these runs exercise everything up to the device checks.

The venvs are built once and cached under tests/.artifacts/ (git-ignored),
keyed by their contents: the first run downloads ~115 MB, later runs reuse them.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cudabox.image import smoke  # noqa: E402

SMOKE = ROOT / "cudabox" / "image" / "smoke.py"
ARTIFACTS = Path(__file__).resolve().parent / ".artifacts"
PY = "%d.%d" % sys.version_info[:2]

STACKS = {
    "12.4": ["nvidia-cuda-runtime-cu12==12.4.*", "nvidia-cuda-nvrtc-cu12==12.4.*"],
    "12.8": ["nvidia-cuda-runtime-cu12==12.8.*", "nvidia-cuda-nvrtc-cu12==12.8.*"],
}
# torch 2.7.1+cu128's torch.cuda.get_arch_list()
TORCH_27_CU128 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


# --------------------------------------------------------------------------
# Unit tests: architecture coverage
# --------------------------------------------------------------------------

def test_torch_cu128_covers_blackwell_and_ada_but_not_volta():
    assert smoke.arch_covers(TORCH_27_CU128, "12.0") == "sm_120"
    assert smoke.arch_covers(TORCH_27_CU128, "8.9") == "sm_86"  # Ada runs Ampere SASS
    assert smoke.arch_covers(TORCH_27_CU128, "7.0") is None     # Volta: nothing <= 7.0
    assert smoke.arch_covers(TORCH_27_CU128, "12.1") == "sm_120"
    assert smoke.arch_covers(TORCH_27_CU128, "10.3") == "sm_100"


def test_sass_never_crosses_a_major_version():
    assert smoke.arch_covers(["sm_90"], "12.0") is None
    assert smoke.arch_covers(["sm_86"], "9.0") is None
    assert smoke.arch_covers(["sm_89"], "8.6") is None  # newer minor does not run on older


def test_ptx_is_jit_compiled_for_newer_gpus():
    assert smoke.arch_covers(["compute_90"], "12.0") == "compute_90"
    assert smoke.arch_covers(["compute_90"], "9.0") == "compute_90"
    assert smoke.arch_covers(["compute_90"], "8.9") is None
    assert smoke.arch_covers(["sm_80", "compute_80"], "12.0") == "compute_80"
    assert smoke.arch_covers(["compute_80", "sm_80", "sm_86"], "8.9") == "sm_86"  # closest SASS


def test_arch_specific_targets_run_on_exactly_their_cc():
    # Decision (documented in docs/smoke-test.md): sm_90a is SASS that runs on
    # CC 9.0 and nothing else, so it covers exactly 9.0 and never generalises.
    assert smoke.arch_covers(["sm_90a"], "9.0") == "sm_90a"
    assert smoke.arch_covers(["sm_90a"], "10.0") is None
    assert smoke.arch_covers(["sm_90a"], "12.0") is None
    assert smoke.arch_covers(["sm_100a"], "10.3") is None
    assert smoke.arch_covers(["compute_90a"], "12.0") is None  # 'a' PTX is not portable
    assert smoke.arch_covers(["compute_90a"], "9.0") == "compute_90a"


def test_family_specific_targets_cover_their_family():
    assert smoke.arch_covers(["sm_100f"], "10.3") == "sm_100f"
    assert smoke.arch_covers(["sm_100f"], "12.0") is None
    assert smoke.arch_covers(["sm_103f"], "10.0") is None


def test_arch_coverage_ignores_non_cuda_entries_and_takes_any_cc_form():
    assert smoke.arch_covers(["gfx90a", "gfx942"], "9.0") is None
    assert smoke.arch_covers([], "9.0") is None
    assert smoke.arch_covers(["sm_80"], (8, 6)) == "sm_80"
    assert smoke.arch_covers(["sm_80"], "sm_86") == "sm_80"
    assert smoke.parse_arch("sm_120") == ("sm", 12, 0, "")
    assert smoke.parse_arch("compute_90a") == ("compute", 9, 0, "a")
    assert smoke.parse_cc(12.0) == (12, 0)


# --------------------------------------------------------------------------
# Unit tests: versions, targets, statuses
# --------------------------------------------------------------------------

@pytest.mark.parametrize("installed, spec, ok", [
    ("2.7.1+cu128", "2.7.1", True),        # local label ignored unless asked for
    ("2.7.1", "2.7.1+cu128", False),
    ("2.7.1+cu126", "2.7.1+cu128", False),
    ("12.8.93", "12.8.*", True),
    ("12.80.1", "12.8.*", False),
    ("12.9.0", "12.8.*", False),
    ("12.8", "12.8.0", True),              # zero padding, as PEP 440
    ("2.8.0rc1", "2.8.0", False),
    ("9.10.2.21", "9.10.2.21", True),
    ("12.4.127", "==12.4.127", True),
    ("12.4.127", "12.4.99", False),
])
def test_version_matches(installed, spec, ok):
    assert smoke.version_matches(installed, spec) is ok


def test_version_spec_with_ranges_is_rejected():
    with pytest.raises(ValueError):
        smoke.version_matches("1.0", ">=1.0")


def test_cudnn_version_decoding_both_encodings():
    assert smoke.decode_cudnn_version(91002) == (9, 10, 2)   # cuDNN 9: M*10000 + m*100 + p
    assert smoke.decode_cudnn_version(90100) == (9, 1, 0)
    assert smoke.decode_cudnn_version(8907) == (8, 9, 7)     # cuDNN 8: M*1000 + m*100 + p
    assert smoke.cudnn_matches((9, 10, 2), "9.10.2.21")
    assert not smoke.cudnn_matches((9, 10, 1), "9.10.2.21")
    assert smoke.cudnn_matches((9, 10, 2), "9")


def test_target_arguments_and_merging():
    assert smoke.target_arg("sm_120")["cc"] == (12, 0)
    assert smoke.target_arg("9.0")["arch"] == "sm_90"
    assert smoke.target_arg("sm_90a")["arch"] == "sm_90a"
    with pytest.raises(argparse.ArgumentTypeError):
        smoke.target_arg("blackwell")
    expect = {"targets": [{"gpu": "H100", "cc": "9.0"}, {"gpu": "RTX 5090", "cc": "12.0"}]}
    devices = [{"name": "NVIDIA A100-SXM4-80GB", "cc": "8.0"}, {"name": "NVIDIA H100", "cc": "9.0"}]
    targets = smoke.build_targets(expect, [smoke.target_arg("sm_90a")], devices)
    assert [t["arch"] for t in targets] == ["sm_90", "sm_120", "sm_90a", "sm_80"]
    targets = smoke.build_targets(expect, [smoke.target_arg("sm_120")], [])
    assert [t["arch"] for t in targets] == ["sm_90", "sm_120"]  # replaced, not doubled


def test_peak_matching_prefers_name_then_unique_cc():
    expect = {"targets": [{"gpu": "GeForce RTX 5090", "cc": "12.0", "peak_fp16_tflops": 209.5},
                          {"gpu": "RTX PRO 6000", "cc": "12.0", "peak_fp16_tflops": 250},
                          {"gpu": "H100 SXM", "cc": "9.0", "peak_fp16_tflops": 989}]}
    assert smoke.match_target(expect, "NVIDIA GeForce RTX 5090", (12, 0))["peak_fp16_tflops"] == 209.5
    assert smoke.match_target(expect, "NVIDIA H100 80GB HBM3", (9, 0))["gpu"] == "H100 SXM"
    assert smoke.match_target(expect, "NVIDIA RTX 5080", (12, 0)) is None  # ambiguous CC
    assert smoke._judge(150.0, "TFLOPS", 209.5, 0.5)[0] == "pass"
    assert smoke._judge(50.0, "TFLOPS", 209.5, 0.5)[0] == "warn"
    assert smoke._judge(500.0, "TFLOPS", 209.5, 0.5)[0] == "warn"  # above peak is suspicious
    assert smoke._judge(50.0, "TFLOPS", None, 0.5)[0] == "pass"


def test_overall_status_never_claims_a_gpu_pass_without_gpu_work():
    ok = [{"name": "cudart", "status": "pass"}, {"name": "gpu", "status": "skip"}]
    assert smoke.overall_status(ok, gpu_ran=False) == "passed-without-gpu"
    assert smoke.overall_status(ok, gpu_ran=True) == "passed"
    warned = ok + [{"name": "gpu.gemm", "status": "warn"}]
    assert smoke.overall_status(warned, gpu_ran=True) == "passed"
    assert smoke.overall_status(ok + [{"name": "x", "status": "fail"}], gpu_ran=True) == "failed"


def test_a_crashing_check_becomes_a_fail_record():
    def broken(*_):
        raise RuntimeError("boom")
    record = smoke.run_check("broken", broken)
    assert record["status"] == "fail" and "RuntimeError: boom" in record["detail"]
    assert set(record) == {"name", "status", "detail", "ms"}


# --------------------------------------------------------------------------
# End-to-end: smoke.py in real venvs with NVIDIA's wheels
# --------------------------------------------------------------------------

def _build_venv(requirements):
    """A venv with `requirements`, cached under tests/.artifacts by content."""
    key = hashlib.sha256(json.dumps([sys.version, sys.executable, sorted(requirements)])
                         .encode()).hexdigest()[:16]
    final = ARTIFACTS / ("venv-" + key)
    python = final / "bin" / "python"
    if (final / ".ready").exists():
        return python
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    work = ARTIFACTS / ("venv-%s.tmp%d" % (key, os.getpid()))
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(work)], check=True)
    pip = subprocess.run([str(work / "bin" / "python"), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check"] + requirements,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if pip.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        pytest.fail("pip install %s failed:\n%s" % (" ".join(requirements), pip.stdout[-3000:]))
    (work / ".ready").write_text("\n".join(requirements) + "\n")
    try:
        os.rename(work, final)  # a venv's python finds its prefix relative to itself
    except OSError:             # another process finished first: use theirs
        shutil.rmtree(work, ignore_errors=True)
    return python


@pytest.fixture(scope="session")
def venvs():
    return {cuda: _build_venv(reqs) for cuda, reqs in STACKS.items()}


def _expect(tmp_path, cuda, **overrides):
    expect = {"schema": "cudabox.expect/v1", "stack_hash": "test-" + cuda.replace(".", ""),
              "python": PY, "cuda": cuda,
              "packages": {"nvidia-cuda-runtime-cu12": cuda + ".*",
                           "nvidia-cuda-nvrtc-cu12": cuda + ".*"},
              "frameworks": [],
              "targets": [{"gpu": "A100", "cc": "8.0", "peak_fp16_tflops": 312,
                           "peak_bandwidth_gbs": 1555}],
              "thresholds": {"gemm_pass": 0.5, "bandwidth_pass": 0.6}}
    expect.update(overrides)
    path = tmp_path / ("expect-%s.json" % cuda)
    path.write_text(json.dumps(expect))
    return path


def _run(python, *args):
    return subprocess.run([str(python), str(SMOKE)] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


def _report(python, expect, *args):
    proc = _run(python, "--expect", expect, "--json", "--no-gpu", *args)
    report = json.loads(proc.stdout)  # stdout is exactly one JSON document
    return proc.returncode, report, {c["name"]: c for c in report["checks"]}


@pytest.mark.network
@pytest.mark.parametrize("cuda", sorted(STACKS))
def test_good_stack_passes_without_gpu(venvs, tmp_path, cuda):
    code, report, checks = _report(venvs[cuda], _expect(tmp_path, cuda))
    assert (code, report["status"]) == (4, "passed-without-gpu"), checks
    assert checks["cudart"]["status"] == "pass"
    assert checks["cudart"]["detail"].startswith("CUDA runtime %s at " % cuda)
    assert checks["packages"]["status"] == "pass"
    assert checks["python"]["status"] == "pass"
    assert checks["nvrtc"]["status"] == "pass"
    assert "NVRTC %s compiled CUBINs: sm_80" % cuda in checks["nvrtc"]["detail"]
    assert checks["gpu"]["status"] == "skip"
    assert report["gpu_available"] is False and report["perf"]["gemm_tflops"] is None


@pytest.mark.network
def test_nvrtc_12_4_cannot_target_blackwell_but_12_8_can(venvs, tmp_path):
    targets = [{"gpu": "GeForce RTX 5090", "cc": "12.0"}, {"gpu": "A100", "cc": "8.0"}]
    code, report, checks = _report(venvs["12.4"], _expect(tmp_path, "12.4", targets=targets))
    assert (code, report["status"]) == (1, "failed")
    assert checks["nvrtc"]["status"] == "fail"
    detail = checks["nvrtc"]["detail"]
    assert "NVRTC 12.4 cannot compile for sm_120 (GeForce RTX 5090)" in detail
    assert "invalid value for --gpu-architecture" in detail  # the NVRTC log is included
    assert "compiled: sm_80" in detail
    assert [n for n, c in checks.items() if c["status"] == "fail"] == ["nvrtc"]

    code, report, checks = _report(venvs["12.8"], _expect(tmp_path, "12.8", targets=targets))
    assert (code, report["status"]) == (4, "passed-without-gpu")
    assert re.search(r"sm_120 \d+B", checks["nvrtc"]["detail"])


@pytest.mark.network
def test_target_flag_adds_an_arch(venvs, tmp_path):
    code, report, checks = _report(venvs["12.4"], _expect(tmp_path, "12.4"), "--target", "sm_120")
    assert code == 1 and "cannot compile for sm_120 (from --target)" in checks["nvrtc"]["detail"]
    assert report["targets"] == ["sm_80", "sm_120"]
    code, report, checks = _report(venvs["12.8"], _expect(tmp_path, "12.8"), "--target", "12.0")
    assert code == 4 and report["targets"] == ["sm_80", "sm_120"]


@pytest.mark.network
def test_no_targets_compiles_ptx(venvs, tmp_path):
    code, report, checks = _report(venvs["12.8"], _expect(tmp_path, "12.8", targets=[]))
    assert code == 4
    assert "PTX for compute_75 (no targets given)" in checks["nvrtc"]["detail"]


@pytest.mark.network
def test_wrong_package_version_fails(venvs, tmp_path):
    expect = _expect(tmp_path, "12.4", packages={"nvidia-cuda-runtime-cu12": "12.8.*",
                                                 "nvidia-cuda-nvrtc-cu12": "12.4.127"})
    code, report, checks = _report(venvs["12.4"], expect)
    assert (code, report["status"]) == (1, "failed")
    assert checks["packages"]["status"] == "fail"
    assert "nvidia-cuda-runtime-cu12 is 12.4.127, expected 12.8.*" in checks["packages"]["detail"]
    assert checks["cudart"]["status"] == "pass"


@pytest.mark.network
def test_missing_package_and_wrong_python_fail(venvs, tmp_path):
    expect = _expect(tmp_path, "12.8", python="3.7",
                     packages={"torch": "2.7.1", "nvidia-cuda-nvrtc-cu12": "12.8.*"})
    code, report, checks = _report(venvs["12.8"], expect)
    assert (code, report["status"]) == (1, "failed")
    assert checks["python"]["status"] == "fail"
    assert "expected 3.7" in checks["python"]["detail"]
    assert "torch not installed" in checks["packages"]["detail"]


@pytest.mark.network
def test_runtime_version_mismatch_and_missing_cudnn_fail(venvs, tmp_path):
    expect = _expect(tmp_path, "12.4", cudnn="9.10.2.21", packages={})
    code, report, checks = _report(venvs["12.8"], expect)
    assert code == 1
    assert checks["cudart"]["status"] == "fail"
    assert "CUDA runtime is 12.8, expected 12.4" in checks["cudart"]["detail"]
    assert checks["cudnn"]["status"] == "fail" and "libcudnn" in checks["cudnn"]["detail"]


@pytest.mark.network
def test_json_report_is_versioned_and_complete(venvs, tmp_path):
    code, report, checks = _report(venvs["12.8"], _expect(tmp_path, "12.8"))
    assert report["schema"] == "cudabox.smoke/v1"
    assert report["stack_hash"] == "test-128"
    assert report["python"] == sys.version.split()[0]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", report["started"])
    assert isinstance(report["duration_s"], float) and report["duration_s"] < 60
    assert report["gpu_available"] is False and report["gpu_reason"]
    assert report["devices"] == []
    assert set(report["perf"]) >= {"gemm_tflops", "bandwidth_gbs"}
    assert list(checks) == ["python", "packages", "frameworks", "cudart", "cudnn", "nvrtc", "gpu"]
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "ms"}
        assert check["status"] in {"pass", "fail", "warn", "skip"}
        assert isinstance(check["detail"], str) and isinstance(check["ms"], float)


@pytest.mark.network
def test_human_summary(venvs, tmp_path):
    proc = _run(venvs["12.4"], "--expect", _expect(tmp_path, "12.4"), "--no-gpu")
    assert proc.returncode == 4
    lines = proc.stdout.splitlines()
    assert len(lines) < 25
    assert any(re.match(r"^\s+PASS\s+nvrtc\s+NVRTC 12\.4", line) for line in lines)
    assert any(re.match(r"^\s+SKIP\s+gpu\s+", line) for line in lines)
    assert "result: passed-without-gpu (exit 4" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.network
def test_gpu_detection_reports_why_there_is_none(venvs, tmp_path):
    """Without --no-gpu: on a machine without an NVIDIA driver, the report says why."""
    proc = _run(venvs["12.8"], "--expect", _expect(tmp_path, "12.8"), "--json")
    report = json.loads(proc.stdout)
    if report["gpu_available"]:  # a GPU machine: then the device checks ran
        assert report["status"] in ("passed", "failed")
        assert any(c["name"].startswith("gpu.") for c in report["checks"])
    else:
        assert (proc.returncode, report["status"]) == (4, "passed-without-gpu")
        assert report["gpu_reason"]
        if not smoke._load_nvml():
            assert "libnvidia-ml.so.1 not found" in report["gpu_reason"]


@pytest.mark.network
def test_library_search_skips_alt_and_builtins_variants(venvs):
    code = "import sys; sys.path.insert(0, %r); import smoke; print(smoke.find_library('libnvrtc')[0])"
    proc = subprocess.run([str(venvs["12.8"]), "-c", code % str(SMOKE.parent)],
                          stdout=subprocess.PIPE, text=True, check=True)
    # the 12.8 wheel ships libnvrtc.so.12, libnvrtc.alt.so.12 and libnvrtc-builtins.so.12.8
    assert proc.stdout.strip().endswith("/nvidia/cuda_nvrtc/lib/libnvrtc.so.12")


# --------------------------------------------------------------------------
# Usage errors and robustness (no venv needed)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (None, "cannot read expect file"),
    ("{not json", "not valid JSON"),
    ('{"schema": "cudabox.expect/v9"}', "schema"),
    ('{"targets": [{"gpu": "x"}]}', "needs a 'cc'"),
    ('{"packages": ["torch"]}', "expect.packages must be a JSON object"),
    ('{"frameworks": ["caffe"]}', "unknown framework"),
    ("[1, 2]", "must hold a JSON object"),
])
def test_bad_expect_file_exits_2(tmp_path, content, message):
    path = tmp_path / "expect.json"
    if content is not None:
        path.write_text(content)
    proc = _run(sys.executable, "--expect", path, "--json")
    assert proc.returncode == 2
    assert message in proc.stderr
    assert json.loads(proc.stdout) == {"schema": "cudabox.smoke/v1", "status": "error",
                                       "error": proc.stderr.strip()[len("smoke: "):]}


def test_bad_usage_exits_2(tmp_path):
    assert _run(sys.executable, "--target", "blackwell").returncode == 2
    assert _run(sys.executable, "--frobnicate").returncode == 2


def test_json_stdout_stays_clean_when_libraries_print(tmp_path):
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, %r)
        import smoke
        with smoke.stdout_to_stderr():
            os.write(1, b"noise from C\\n")
            print("noise from Python")
        print("{}")
    """ % str(SMOKE.parent))
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=True)
    assert proc.stdout == "{}\n"
    assert "noise from C" in proc.stderr and "noise from Python" in proc.stderr


def _python38():
    for candidate in [shutil.which("python3.8")] + sorted(
            Path.home().glob(".pyenv/versions/3.8*/bin/python3.8")):
        if candidate and subprocess.run([str(candidate), "--version"], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE).returncode == 0:
            return str(candidate)
    return None


def test_runs_on_python_3_8(tmp_path):
    """smoke.py must run on the oldest Python an image may have."""
    python = _python38()
    if python is None:
        pytest.skip("no Python 3.8 interpreter on this machine")
    path = tmp_path / "expect.json"
    path.write_text(json.dumps({"python": "3.8", "targets": [{"cc": "8.0"}]}))
    proc = _run(python, "--expect", path, "--json", "--no-gpu")
    report = json.loads(proc.stdout)
    assert (proc.returncode, report["status"]) == (4, "passed-without-gpu"), report
    assert report["python"].startswith("3.8.")


# --------------------------------------------------------------------------
# Frameworks whose CUDA comes from the image (Paddle 2.x, MXNet): minor-version compatible
# --------------------------------------------------------------------------

@pytest.mark.parametrize("built, image, ok", [
    ("11.8", "11.8", True), ("12.0", "12.2", True), ("11.2", "11.8", True),
    ("12.6", "12.2", False), ("11.8", "12.2", False)])
def test_system_cuda_framework_runs_on_the_same_major_same_or_newer_minor(built, image, ok):
    assert (smoke._system_cuda_problem(built, {"cuda": image}) is None) is ok


def test_paddle_and_mxnet_are_known_frameworks_with_a_paddle_gemm():
    assert {"paddle", "mxnet"} <= set(smoke.FRAMEWORK_CHECKS)
    assert smoke.choose_gemm({"frameworks": ["paddle"]}) == "paddle"
    assert smoke.choose_gemm({"frameworks": ["torch", "paddle"]}) == "torch"
    assert smoke.GEMM_PATHS["paddle"].__name__ == "_PaddleGemm"


def test_a_cuda_11_runtime_without_a_driver_is_read_from_its_file_name(tmp_path):
    """CUDA 11's cudaRuntimeGetVersion needs a driver (error 35 without one): the file name says the version."""
    real = tmp_path / "libcudart.so.11.8.89"
    real.write_bytes(b"")
    (tmp_path / "libcudart.so.11.0").symlink_to(real.name)
    link = str(tmp_path / "libcudart.so.11.0")
    assert smoke._cudart_without_driver(link, [], {"cuda": "11.8"})[0] == "pass"
    assert smoke._cudart_without_driver(link, [], {"cuda": "11.7"})[0] == "fail"
    bare = tmp_path / "wheel" / "libcudart.so.11.0"  # NVIDIA's pip wheel names no minor
    bare.parent.mkdir()
    bare.write_bytes(b"")
    status, detail = smoke._cudart_without_driver(str(bare), [], {"cuda": "11.8"})
    assert status == "warn" and "not compared" in detail


@pytest.mark.parametrize("built, image, ok", [("11.2", "11.8", True), ("12.3", "12.3", True),
                                              ("12.3", "12.2", False), ("11.8", "12.2", False)])
def test_tensorflow_built_for_an_older_minor_passes_on_a_newer_image(monkeypatch, built, image, ok):
    """TF 2.5-2.13 report the CUDA they were built with (2.10: 11.2) and run on a newer minor of the same
    major: the resolver gives TF 2.10 the CUDA 11.8 image, and the smoke test must not fail it."""
    import types

    fake = types.SimpleNamespace(__version__="2.10.1", sysconfig=types.SimpleNamespace(
        get_build_info=lambda: {"is_cuda_build": True, "cuda_version": built, "cudnn_version": "8"}))
    monkeypatch.setitem(sys.modules, "tensorflow", fake)
    verdict = smoke.check_tensorflow({"cuda": image, "cudnn": "8.9.6.50"}, [])
    assert (verdict[0] == "pass") is ok, verdict
