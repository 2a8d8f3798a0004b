"""`cudabox export k8s` and `run --on k8s`: the Job against the Kubernetes schema, its node affinity against
GPU Feature Discovery labels, and the client path against a replayed API exchange (tests/k8s_replay.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from tests.k8s_replay import Replay
from tests.support import run_cli

SAXPY = 'name: saxpy\npython: "3.11"\ncuda: "12.8"\ngpus: [A100, "RTX 4090", "RTX 5090"]\n'


def _schema_version() -> str:
    """The newest Kubernetes release kubernetes-validate ships a schema for."""
    import kubernetes_validate

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    versions = [d.name.split("-")[0].lstrip("v") for d in root.iterdir() if re.match(r"v\d+\.\d+\.\d+-local$", d.name)]
    return max(versions, key=lambda v: tuple(map(int, v.split("."))))


def validate(doc: dict) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, _schema_version(), strict=True)


def _project(tmp_path: Path, text: str = SAXPY, name: str = "proj") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "cudabox.yaml").write_text(text)
    run_cli("lock", "--no-packages", cwd=directory, check=0)  # the affinity needs the stack's facts only
    return directory


def _export(project: Path, *args) -> dict:
    return yaml.safe_load(run_cli("export", "k8s", *args, cwd=project, check=0).stdout)


# GPU Feature Discovery's labels, as a node carries them
def gfd(driver: str, cc: str, product: str) -> dict:
    major, minor, *rest = driver.split(".")
    cmaj, cmin = cc.split(".")
    return {"nvidia.com/cuda.driver-version.full": driver, "nvidia.com/cuda.driver-version.major": major,
            "nvidia.com/cuda.driver-version.minor": minor, "nvidia.com/cuda.driver-version.revision": rest[0] if rest
            else "0", "nvidia.com/gpu.compute.major": cmaj, "nvidia.com/gpu.compute.minor": cmin,
            "nvidia.com/gpu.product": product}


def schedulable(job: dict, labels: dict) -> bool:
    """The scheduler's rule: any term whose expressions all hold (In, NotIn, Exists, Gt, Lt on strings)."""
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def holds(e):
        value = labels.get(e["key"])
        if e["operator"] == "In":
            return value in e["values"]
        if e["operator"] in ("Gt", "Lt"):
            assert len(e["values"]) == 1  # the API requires exactly one integer value
            if value is None:
                return False
            return int(value) > int(e["values"][0]) if e["operator"] == "Gt" else int(value) < int(e["values"][0])
        raise AssertionError(e["operator"])

    return any(all(holds(e) for e in term["matchExpressions"]) for term in terms)


# --------------------------------------------------------------------------- the Job


def test_job_validates_against_the_kubernetes_schema(tmp_path):
    job = _export(_project(tmp_path), "--gpus", "2", "--shm-size", "8Gi", "--", "python", "saxpy.py", "--n", "1")
    validate(job)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert re.fullmatch(r"cudabox/saxpy:[0-9a-f]{16}-[0-9a-f]{8}", container["image"])
    assert container["command"] == ["python", "saxpy.py", "--n", "1"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (1000, 1000)
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_affinity_follows_the_stack(tmp_path):
    job = _export(_project(tmp_path), "--", "true")
    a100, rtx4090, rtx5090, h100 = "8.0", "8.9", "12.0", "9.0"
    # CUDA 12.8 natively: driver >= 570.26
    assert schedulable(job, gfd("570.86.15", a100, "NVIDIA-A100-SXM4-80GB"))
    assert schedulable(job, gfd("570.26", rtx5090, "NVIDIA-GeForce-RTX-5090"))
    assert schedulable(job, gfd("580.65.06", rtx4090, "NVIDIA-GeForce-RTX-4090"))
    assert not schedulable(job, gfd("570.25", rtx5090, "NVIDIA-GeForce-RTX-5090"))
    assert not schedulable(job, gfd("565.57.01", a100, "NVIDIA-A100-SXM4-80GB"))
    assert not schedulable(job, gfd("470.256.02", "7.0", "Tesla-V100-SXM2-32GB"))
    assert not schedulable(job, gfd("580.65.06", h100, "NVIDIA-H100-80GB-HBM3"))  # not a target GPU
    preferred = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"][0]
    assert preferred["key"] == "nvidia.com/gpu.product"
    assert set(preferred["values"]) == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-5090"}


def test_affinity_without_targets_comes_from_the_builds_code(tmp_path):
    job = _export(_project(tmp_path, 'name: tv\nrequirements: ["torch==2.14.1+cu126"]\n'), "--", "true")
    validate(job)
    # torch cu126 carries sm_50..sm_90 (no sm_120, no PTX): V100 yes, RTX 5090 no; driver >= 560.28.03
    assert schedulable(job, gfd("560.35.03", "7.0", "Tesla-V100-SXM2-32GB"))
    assert schedulable(job, gfd("570.86.15", "9.0", "NVIDIA-H100-80GB-HBM3"))
    assert not schedulable(job, gfd("570.86.15", "12.0", "NVIDIA-GeForce-RTX-5090"))
    assert not schedulable(job, gfd("555.42.06", "8.0", "NVIDIA-A100-SXM4-80GB"))


def test_forward_compatible_stack_accepts_its_driver_branches(tmp_path):
    text = 'name: fc\ncuda: "12.4"\ngpus: [A100]\ndriver: "470.256.02"\nallow_forward_compat: true\n'
    job = _export(_project(tmp_path, text), "--", "true")
    validate(job)
    assert schedulable(job, gfd("470.256.02", "8.0", "NVIDIA-A100-SXM4-80GB"))  # through cuda-compat
    assert schedulable(job, gfd("550.54.15", "8.0", "NVIDIA-A100-SXM4-80GB"))  # natively
    assert not schedulable(job, gfd("510.47.03", "8.0", "NVIDIA-A100-SXM4-80GB"))


def test_export_is_deterministic_and_writes_files(tmp_path):
    project = _project(tmp_path)
    first = run_cli("export", "k8s", "--", "python", "x.py", cwd=project, check=0).stdout
    assert first == run_cli("export", "k8s", "--", "python", "x.py", cwd=project, check=0).stdout
    assert "&id" not in first and "*id" not in first  # no YAML anchors
    out = tmp_path / "job.yaml"
    run_cli("export", "k8s", "-o", out, "--name", "train-1", "--registry", "ghcr.io/acme", "--", "python", "x.py",
            cwd=project, check=0)
    job = yaml.safe_load(out.read_text())
    assert job["metadata"]["name"] == "train-1"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"].startswith("ghcr.io/acme/cudabox/saxpy:")
    no_gpu = yaml.safe_load(run_cli("export", "k8s", "--gpus", "0", "--", "true", cwd=project, check=0).stdout)
    validate(no_gpu)
    assert "affinity" not in no_gpu["spec"]["template"]["spec"]


@pytest.mark.parametrize("args, message", [
    (["--name", "Bad_Name", "--", "true"], "not a valid Job name"),
    (["--shm-size", "lots", "--", "true"], "not a Kubernetes quantity"),
    ([], "no command"),
])
def test_bad_input_is_exit_2(tmp_path, args, message):
    assert message in run_cli("export", "k8s", *args, cwd=_project(tmp_path), check=2).stderr


# --------------------------------------------------------------------------- run --on k8s, replayed


def _run_k8s(project: Path, kubeconfig: Path, *command, extra=()):
    env = {"KUBECONFIG": str(kubeconfig), "CUDABOX_REGISTRY": "registry.example.com"}
    return run_cli("run", "--on", "k8s", "--name", "cb-test-k8s", *extra, "--", *command, cwd=project, env=env,
                   timeout=60)


def test_run_on_k8s_streams_the_log_and_succeeds(tmp_path):
    project = _project(tmp_path)
    with Replay.load("job-succeeds") as api:
        proc = _run_k8s(project, api.kubeconfig(tmp_path / "kubeconfig"), "python", "-c", "print('hi')")
    assert proc.returncode == 0, (proc.stderr, api.unexpected)
    assert proc.stdout == "hello from the job\nstep 2\n"
    assert "created Job default/cb-test-k8s" in proc.stderr
    assert "Unschedulable: 0/3 nodes are available" in proc.stderr  # said while it waited
    assert "Running on gpu-node-3" in proc.stderr
    assert not api.unexpected
    create = api.requests[0]
    assert (create["method"], create["path"]) == ("POST", "/apis/batch/v1/namespaces/default/jobs")
    sent = create["body"]
    validate(sent)
    expected = yaml.safe_load(run_cli("export", "k8s", "--name", "cb-test-k8s", "--registry", "registry.example.com",
                                      "--", "python", "-c", "print('hi')", cwd=project, check=0).stdout)
    assert sent == expected  # run --on k8s submits exactly what export k8s prints
    watch = api.requests[1]
    assert watch["query"]["labelSelector"] == "job-name=cb-test-k8s" and watch["query"]["watch"] == "true"
    assert api.requests[2]["query"].get("follow") == "true"


def test_run_on_k8s_reports_a_failed_job_with_its_exit_code(tmp_path):
    project = _project(tmp_path)
    with Replay.load("job-fails") as api:
        proc = _run_k8s(project, api.kubeconfig(tmp_path / "kubeconfig"), "python", "-c", "raise SystemExit(3)")
    assert proc.returncode == 3
    assert "SystemExit: 3" in proc.stdout
    assert "Job default/cb-test-k8s failed (exit code 3, Error; Job has reached the specified backoff limit)" \
        in proc.stderr
    assert not api.unexpected


def test_run_on_k8s_needs_a_kubeconfig_and_the_client(tmp_path):
    project = _project(tmp_path)
    proc = _run_k8s(project, tmp_path / "nowhere", "true")
    assert proc.returncode == 5 and "no kubeconfig" in proc.stderr
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "kubernetes.py").write_text("raise ImportError('blocked for the test')\n")
    env = {"KUBECONFIG": str(tmp_path / "nowhere"), "PYTHONPATH": str(blocker) + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    proc = run_cli("run", "--on", "k8s", "--", "true", cwd=project, env=env)
    assert proc.returncode == 5 and "pip install 'cudabox[k8s]'" in proc.stderr
