"""`cudabox check`: the smoke test on the host (docs/check.md).

Without a GPU here: the facts readers, the expectations, library discovery in a venv holding NVIDIA's
wheels (and no cudabox dependency: the plain `python -m cudabox check` path), exit 4, the GPU paths
against the C stand-in for libcuda/NVML/cuBLAS (tests/test_smoke_gpu.py builds it), the per-node
results in `doctor` and `fleet plan`, the Slurm health-check script on the real local cluster, and the
Kubernetes Job against the schema.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cudabox.jobs import nodecheck, noderesults
from cudabox.jobs.nodefacts import Facts, GpuFacts, facts_from_files, facts_from_matrix, flat_records
from tests.slurm_fixtures import slurm_cluster  # noqa: F401 - fixture
from tests.support import REPO, run_cli
from tests.test_k8s import validate
from tests.test_smoke import STACKS
from tests.test_smoke_gpu import standin  # noqa: F401 - fixture
from tests.test_smoke import _build_venv

H100 = "NVIDIA H100 80GB HBM3"  # as NVML names an H100 SXM5 (an alias in matrices/gpus.yaml)


# --------------------------------------------------------------------------- pure logic


def test_facts_read_without_pyyaml_are_the_matrix_facts(matrix):
    from_matrix = facts_from_matrix(matrix)
    with_yaml = facts_from_files(REPO / "matrices")
    flat = facts_from_files(REPO / "matrices", use_yaml=False)
    assert flat.gpus == with_yaml.gpus == from_matrix.gpus
    assert flat.thresholds == with_yaml.thresholds == from_matrix.thresholds == {"gemm_pass": 0.5,
                                                                                 "bandwidth_pass": 0.6}
    assert flat.minor_compat == from_matrix.minor_compat and 12 in flat.minor_compat
    assert "without PyYAML" in flat.source
    h100 = flat.find(H100)
    assert h100.cc == "9.0" and h100.peak_fp16_tflops and h100.peak_bandwidth_gbs


def test_flat_reader_takes_quotes_lists_nulls_and_comments():
    text = ('# head\nother:\n  - name: "no"\ngpus:\n  # a comment\n  - name: "A, B # c"  # trailing\n'
            '    cc: "8.0"\n    peak: null\n    n: 3\n    aliases: [X1, "Y, 2", \'Z\']\n  - name: Plain\n')
    assert flat_records(text, "gpus") == [{"name": "A, B # c", "cc": "8.0", "peak": None, "n": 3,
                                           "aliases": ["X1", "Y, 2", "Z"]}, {"name": "Plain"}]


FACTS = Facts(gpus=(GpuFacts("H100 SXM5 80 GB", "9.0", 989.5, 3350.0, (H100,)),), thresholds={"gemm_pass": 0.5},
              minor_compat={12: "525.60.13", 13: "580.65.06"})


def test_expectations_from_what_the_host_has():
    found = {"frameworks": {"torch": "2.9.0", "jax": "0.7.0"}, "cudart": {"version": "13.0"},
             "devices": [{"name": H100, "cc": "9.0"}, {"name": H100, "cc": "9.0"},
                         {"name": "Unknown Board", "cc": "8.6"}]}
    expect = nodecheck.expectations(found, FACTS)
    assert expect["frameworks"] == ["torch", "jax"]  # torch runs the GEMM
    assert expect["min_driver"] == "580.65.06"  # CUDA 13's minor-version-compatibility floor
    assert expect["targets"] == [
        {"gpu": H100, "cc": "9.0", "peak_fp16_tflops": 989.5, "peak_bandwidth_gbs": 3350.0},
        {"gpu": "Unknown Board", "cc": "8.6", "peak_fp16_tflops": None, "peak_bandwidth_gbs": None}]
    bare = nodecheck.expectations({"devices": []}, FACTS)
    assert bare["frameworks"] == [] and "min_driver" not in bare and bare["targets"] == []


def test_merging_one_run_per_gpu():
    def run(device, status, gemm):
        return {"status": status, "device": device, "duration_s": 1.0, "perf": {"gemm_tflops": gemm},
                "checks": [{"name": "cudart", "status": "pass"}, {"name": "gpu.kernel", "status":
                                                                  "fail" if status == "failed" else "pass"}]}

    merged = nodecheck.merge([run(0, "passed", 700.0), run(1, "failed", None)])
    assert merged["status"] == "failed" and merged["devices_checked"] == [0, 1] and merged["duration_s"] == 2.0
    assert [(c["name"], c.get("device")) for c in merged["checks"]] == [
        ("cudart", None), ("gpu.kernel", 0), ("gpu.kernel", 1)]
    assert merged["perf"]["gemm_tflops"] == 700.0
    assert [p["device"] for p in merged["perf"]["per_device"]] == [0, 1]
    assert nodecheck.merge([run(0, "passed-without-gpu", None)])["status"] == "passed-without-gpu"


def test_each_gpu_is_the_only_one_its_smoke_run_sees():
    pci = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert nodecheck.gpu_slots(2, None, None, False) == [(0, dict(pci, CUDA_VISIBLE_DEVICES="0")),
                                                         (1, dict(pci, CUDA_VISIBLE_DEVICES="1"))]
    assert nodecheck.gpu_slots(8, 1, "5,7", True) == [(7, {"CUDA_VISIBLE_DEVICES": "7"})]  # a Slurm job's GPUs
    assert nodecheck.gpu_slots(1, None, "GPU-1234", True) == [("GPU-1234", {"CUDA_VISIBLE_DEVICES": "GPU-1234"})]
    assert nodecheck.gpu_slots(0, None, None, False) == [(0, {})]  # no GPU: one run of the checks needing none
    assert nodecheck.gpu_slots(4, None, "", False) == [(0, {})]  # CUDA_VISIBLE_DEVICES="": gpu.cuda says so
    with pytest.raises(nodecheck.InputError, match="--device 2: this node has 2 GPU"):
        nodecheck.gpu_slots(2, 2, None, False)


def test_both_parsers_take_the_same_options():
    """`python -m cudabox check` without typer parses what `cudabox check` parses."""
    from cudabox.cli.root import load
    from cudabox.entry import plain_parser

    command = load("check")
    typer_opts = {o for p in command.params if p.param_type_name == "option" for o in p.opts}
    plain_opts = {o for a in plain_parser()._actions for o in a.option_strings} - {"-h", "--help"}
    assert typer_opts == plain_opts
    helps = {p.opts[0]: p.help for p in command.params}
    assert all(helps[a.option_strings[0]] == a.help for a in plain_parser()._actions if a.option_strings[0] in helps)


def test_bad_flags_exit_2(cli):
    proc = cli("check", "--level", "7")
    assert proc.returncode == 2 and "--level 7: expected 1, 2, 3" in proc.stderr
    proc = cli("check", "--python", "/nonexistent/python")
    assert proc.returncode == 2 and "--python /nonexistent/python: no such interpreter" in proc.stderr


# --------------------------------------------------------------------------- without a GPU


def test_without_gpu_passes_without_gpu_and_keeps_the_result(cli, tmp_path):
    proc = cli("check", "--json", "--level", "1", env={"CUDABOX_NODE": "node-a"})
    assert proc.returncode == 4, proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "cudabox.check/v1" and report["status"] == "passed-without-gpu"
    assert report["exit_code"] == 4 and report["node"] == "node-a" and report["expectations"] == "host"
    assert report["level"] == 1 and report["gpu_reason"]
    kept = Path(os.environ["XDG_STATE_HOME"]) / "cudabox" / "checks" / "node-a.json"
    assert report["path"] == str(kept) and json.loads(kept.read_text())["status"] == "passed-without-gpu"
    text = cli("check", "--no-save", env={"CUDABOX_NODE": "node-b"})
    assert text.returncode == 4 and "result: passed-without-gpu (exit 4" in text.stdout
    assert "nothing ran on a GPU" in text.stdout
    assert not kept.with_name("node-b.json").exists()


@pytest.fixture(scope="module")
def wheels_venv():
    """A venv with NVIDIA's CUDA 12.8 runtime and NVRTC wheels and none of cudabox's dependencies."""
    return _build_venv(STACKS["12.8"])


def _plain(python, *args, env=None, timeout=300):
    """`python -m cudabox check` from the checkout, in a Python without typer, PyYAML or packaging."""
    full = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    proc = subprocess.run([str(python), "-m", "cudabox", "check", "--json", *map(str, args)], capture_output=True,
                          text=True, env=full, timeout=timeout)
    assert proc.stdout, proc.stderr
    report = json.loads(proc.stdout)
    return proc.returncode, report, {(c["name"], c.get("device")): c for c in report.get("checks") or ()}


@pytest.mark.network
def test_plain_python_finds_the_wheels_libraries(wheels_venv):
    missing = subprocess.run([str(wheels_venv), "-c", "import typer"], capture_output=True)
    assert missing.returncode != 0  # really a Python without cudabox's dependencies
    code, report, checks = _plain(wheels_venv, "--no-save")
    assert code == 4 and report["status"] == "passed-without-gpu"
    site = "site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"
    assert report["found"]["cudart"]["version"] == "12.8" and site in report["found"]["cudart"]["path"]
    assert checks[("cudart", None)]["status"] == "pass" and site in checks[("cudart", None)]["detail"]
    assert "cuda_nvrtc" in report["found"]["nvrtc"]["path"]
    assert report["expect"]["min_driver"] == "525.60.13"  # CUDA 12's minor-compat floor, from cuda.yaml
    assert "read without PyYAML" in report["facts"]


@pytest.mark.network
def test_nvrtc_compiles_for_the_given_targets():
    old = _build_venv(STACKS["12.4"])
    code, report, checks = _plain(old, "--target", "sm_120", "--no-save")
    assert code == 1 and report["status"] == "failed"
    assert "NVRTC 12.4 cannot compile for sm_120" in checks[("nvrtc", None)]["detail"]
    code, _, checks = _plain(old, "--target", "sm_90", "--no-save")
    assert code == 4 and "sm_90" in checks[("nvrtc", None)]["detail"]


# --------------------------------------------------------------------------- with the stand-in GPU


def _gpu_env(standin_lib, **extra):
    env = {"LD_LIBRARY_PATH": str(standin_lib), "STANDIN_NAME": H100, "STANDIN_FREE_MIB": "64",
           "STANDIN_BANDWIDTH_GBS": "2500", "STANDIN_TFLOPS": "700", "CUDABOX_NODE": "gpu-node"}
    env.update({k.upper(): str(v) for k, v in extra.items()})
    return env


@pytest.mark.network
def test_stand_in_gpu_passes_against_the_datasheet(wheels_venv, standin, tmp_path):
    code, report, checks = _plain(wheels_venv, "--gemm-size", "16", "--results-dir", tmp_path,
                                  env=_gpu_env(standin))
    assert code == 0 and report["status"] == "passed", checks
    assert [c for c in checks if c[0] == "gpu.kernel"] == [("gpu.kernel", 0)]
    perf = report["perf"]
    assert perf["gemm_tflops"] == pytest.approx(700, rel=0.01)
    assert perf["gemm_fraction"] == pytest.approx(700 / 989.5, rel=0.01)  # H100 SXM5's dense bf16 peak
    assert perf["bandwidth_fraction"] == pytest.approx(2500 / 3350, rel=0.01)
    assert perf["gemm_method"] == "cublas bf16"
    assert json.loads((tmp_path / "gpu-node.json").read_text())["status"] == "passed"


@pytest.mark.network
def test_stand_in_gpu_failures(wheels_venv, standin, tmp_path):
    code, report, checks = _plain(wheels_venv, "--level", "1", "--no-save", env=_gpu_env(standin, standin_gpus=2,
                                                                                         standin_wrong_kernel=1))
    assert code == 1 and report["status"] == "failed"
    assert checks[("gpu.kernel", 0)]["status"] == checks[("gpu.kernel", 1)]["status"] == "fail"
    assert ("gpu.gemm", 0) not in checks  # level 1: no GEMM
    code, _, checks = _plain(wheels_venv, "--level", "1", "--gpus", "3", "--no-save",
                             env=_gpu_env(standin, standin_gpus=2))
    assert code == 1 and checks[("gpu.count", None)]["status"] == "fail"
    assert checks[("gpu.count", None)]["detail"] == "2 GPU(s) visible, 3 expected"
    assert checks[("gpu.kernel", 1)]["status"] == "pass"
    code, _, checks = _plain(wheels_venv, "--level", "1", "--no-save", env=_gpu_env(standin, standin_driver="520.61.05"))
    assert code == 1 and "older than the required 525.60.13" in checks[("gpu.driver", 0)]["detail"]


@pytest.mark.network
def test_lock_mode_asks_whether_the_node_runs_the_projects_stack(wheels_venv, standin, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "cudabox.yaml").write_text('name: proj\npython: "3.11"\ncuda: "12.8"\ngpus: [H100]\n')
    run_cli("lock", cwd=project, check=0)
    args = ("check", "--lock", "-C", project, "--python", wheels_venv, "--level", "1", "--json", "--no-save")
    ok = run_cli(*args, env=_gpu_env(standin))
    report = json.loads(ok.stdout)
    stack = next(c for c in report["checks"] if c["name"] == "stack")
    assert ok.returncode == 0 and stack["status"] == "pass" and "runs here" in stack["detail"], ok.stdout
    assert report["expectations"] == "lock" and report["expect"]["min_driver"]
    old = run_cli(*args, env=_gpu_env(standin, standin_driver="450.80.02"))
    report = json.loads(old.stdout)
    failed = {c["name"]: c["detail"] for c in report["checks"] if c["status"] == "fail"}
    assert old.returncode == 1 and set(failed) == {"gpu.driver", "stack"}
    assert "does not run on " + H100 in failed["stack"]


# --------------------------------------------------------------------------- doctor and fleet plan


def _result(node: str, status: str, gemm=None, failed=()):
    return {"schema": "cudabox.check/v1", "node": node, "status": status, "level": 2,
            "checked_at": "2026-11-22T17:00:00Z", "perf": {"gemm_tflops": gemm, "gemm_fraction": 0.7 if gemm else None},
            "checks": [{"name": n, "status": "fail", "detail": "x"} for n in failed]}


def test_doctor_shows_the_nodes_last_check(monkeypatch, tmp_path):
    from cudabox.host import Host
    from cudabox.jobs import doctor

    monkeypatch.setenv("CUDABOX_NODE", "n1")
    checks = []
    doctor._node_check(checks, Host())
    assert checks[-1].status == "skip" and "never checked" in checks[-1].detail
    noderesults.save(_result("n1", "passed", gemm=700.0))
    doctor._node_check(checks, Host())
    assert checks[-1].status == "ok" and "GEMM 700 TFLOPS (70% of peak)" in checks[-1].detail
    noderesults.save(_result("n1", "failed", failed=("gpu.kernel",)))
    doctor._node_check(checks, Host())
    assert checks[-1].status == "fail" and "failed gpu.kernel" in checks[-1].detail


def test_fleet_plan_shows_each_nodes_last_check(tmp_path):
    results = tmp_path / "results"
    noderesults.save(_result("gpu01", "passed", gemm=700.0), results)
    noderesults.save(_result("gpu02", "failed", failed=("gpu.sustained",)), results)
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text(yaml.safe_dump([{"name": n, "gpu": "H100", "driver": "580.65.06"}
                                         for n in ("gpu01", "gpu02", "gpu03")]))
    proc = run_cli("fleet", "plan", "-i", inventory, "--no-catalog", "--json", "--results-dir", results, cwd=tmp_path,
                   check=0)
    last = json.loads(proc.stdout)["classes"][0]["last_checks"]
    assert last["gpu01"]["status"] == "passed" and last["gpu01"]["gemm_tflops"] == 700.0
    assert last["gpu02"]["failed"] == ["gpu.sustained"] and last["gpu03"] is None
    text = run_cli("fleet", "plan", "-i", inventory, "--no-catalog", "--results-dir", results, cwd=tmp_path,
                   check=0).stdout
    assert "gpu01 passed (2026-11-22T17:00:00Z, level 2, GEMM 700 TFLOPS)" in text
    assert "gpu02 FAILED gpu.sustained" in text and "1 never checked" in text


# --------------------------------------------------------------------------- Kubernetes


def test_k8s_check_job_is_valid_and_spreads_over_gpu_nodes(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "cudabox.yaml").write_text('name: proj\npython: "3.11"\ncuda: "12.8"\ngpus: [H100]\n')
    run_cli("lock", cwd=project, check=0)
    doc = yaml.safe_load(run_cli("export", "k8s-check", "--nodes", "4", cwd=project, check=0).stdout)
    validate(doc)
    spec = doc["spec"]
    assert (spec["completions"], spec["parallelism"], spec["completionMode"], spec["backoffLimitPerIndex"]) == \
        (4, 4, "Indexed", 0)
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": doc["metadata"]["name"]}
    assert spec["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == doc["metadata"]["name"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all(t["matchExpressions"][0]["key"] == "nvidia.com/gpu.present" for t in terms)
    container = pod["containers"][0]
    assert container["command"] == ["python", "/opt/cudabox/smoke.py", "--json", "--level", "1"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["securityContext"]["runAsNonRoot"] is True
    multi = yaml.safe_load(run_cli("export", "k8s-check", "--gpus", "8", "--level", "2", cwd=project, check=0).stdout)
    validate(multi)
    script = multi["spec"]["template"]["spec"]["containers"][0]["command"]
    assert script[:2] == ["sh", "-c"] and "seq 0 7" in script[2] and "--level 2 --device $d" in script[2]
    bad = run_cli("export", "k8s-check", "--name", "Bad_Name", cwd=project)
    assert bad.returncode == 2 and "not a valid Job name" in bad.stderr


# --------------------------------------------------------------------------- Slurm, on the real cluster


def _node(node: str) -> str:
    return subprocess.run(["scontrol", "show", "node", node, "-o"], capture_output=True, text=True).stdout


def _state(node: str) -> tuple[str, str]:
    info = _node(node)
    state = next((p.split("=", 1)[1] for p in info.split() if p.startswith("State=")), "?")
    reason = info.split("Reason=", 1)[1] if "Reason=" in info else ""
    return state, reason


@pytest.mark.slurm
@pytest.mark.network
def test_slurm_healthcheck_drains_a_failing_node_and_resumes_it(slurm_cluster, wheels_venv, standin, tmp_path):
    node = slurm_cluster["node"]
    script = tmp_path / "healthcheck.sh"
    run_cli("export", "slurm-healthcheck", "--python", wheels_venv, "--cudabox-python", sys.executable,
            "--results-dir", tmp_path / "results", "-o", script, check=0)
    assert os.access(script, os.X_OK)
    before, _ = _state(node)
    assert "DRAIN" not in before, f"{node} is drained already ({before}): not touching it"

    def health(**extra):
        env = dict(os.environ, **_gpu_env(standin, cudabox_node=node, **extra))
        return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=300)

    try:
        failing = health(standin_wrong_kernel=1)
        state, reason = _state(node)
        assert failing.returncode == 0 and "DRAIN" in state, (failing.stderr, state)
        assert reason.startswith("cudabox check: gpu.kernel[0]: ") and "computed" in reason
        assert "FAILED, drained" in failing.stderr
        assert json.loads((tmp_path / "results" / f"{node}.json").read_text())["status"] == "failed"
        passing = health()
        state, _ = _state(node)
        assert "DRAIN" not in state, (passing.stderr, state)
        assert "resumed" in passing.stderr
        # a drain for another reason is not ours to undo
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=maintenance by admin"],
                       check=True)
        health()
        state, reason = _state(node)
        assert "DRAIN" in state and reason.startswith("maintenance by admin")
    finally:
        if "DRAIN" in _state(node)[0]:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=True)
        deadline = time.monotonic() + 10
        while "DRAIN" in _state(node)[0] and time.monotonic() < deadline:
            time.sleep(0.5)
    assert "DRAIN" not in _state(node)[0]


@pytest.mark.slurm
def test_slurm_healthcheck_counts_gres_gpus(tmp_path):
    """The count check's number comes from the node's Gres (gpu:TYPE:N, summed) unless fixed at export."""
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\necho 'NodeName=n1 Gres=gpu:h100:4(S:0),gpu:a100:2 State=IDLE'\n")
    fake.chmod(0o755)
    script = tmp_path / "hc.sh"
    run_cli("export", "slurm-healthcheck", "-o", script, check=0)
    probe = tmp_path / "python"  # stands in for the check: prints its arguments
    probe.write_text("#!/bin/sh\necho \"$@\" >> " + str(tmp_path / "args") + "\nexit 4\n")
    probe.chmod(0o755)
    text = script.read_text()
    assert text.count("\nPYTHON=") == 1
    script.write_text(re.sub(r"(?m)^PYTHON=.*$", f"PYTHON={probe}", text))
    subprocess.run(["bash", str(script)], env=dict(os.environ, CUDABOX_SCONTROL=str(fake), CUDABOX_NODE="n1"),
                   check=True, capture_output=True)
    assert (tmp_path / "args").read_text().split() == ["-m", "cudabox", "check", "--level", "1", "--json",
                                                       "--gpus", "6"]
    fixed = run_cli("export", "slurm-healthcheck", "--gpus", "8", "--level", "quick", check=0).stdout
    assert "gpus=8\n" in fixed and "Gres=" not in fixed.split("gpus=8")[0].split("info=")[1]
