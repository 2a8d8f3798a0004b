"""`cudabox run --on slurm`, `jobs` and `export slurm` on the real single-node Slurm cluster, whose batch
jobs `docker run` the project's image on the local engine (transport `local`)."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import subprocess
import time

import pytest

from tests.docker_fixtures import HOST_CA, TEST_PREFIX, cli_env, cudabox, docker_client  # noqa: F401
from tests.slurm_fixtures import job_state, slurm_cluster  # noqa: F401
from tests.support import CUDABOX, run_cli

cluster = [pytest.mark.slurm, pytest.mark.docker]  # these submit real jobs, which `docker run`


def on_cluster(fn):
    for mark in cluster:
        fn = mark(fn)
    return fn


@pytest.fixture(scope="session")
def project(docker_client, cli_env, tmp_path_factory, slurm_cluster):  # noqa: F811
    """A slim plain-CUDA project (Python 3.11), built once; the jobs mount it at /workspace."""
    directory = tmp_path_factory.mktemp("slurm") / "proj"
    directory.mkdir()
    (directory / "cudabox.yaml").write_text(f'name: {TEST_PREFIX}slurm\npython: "3.11"\ncuda: "12.8"\n'
                                            "ca_cert: host-ca.pem\n")  # inside the project
    (directory / "host-ca.pem").write_text(HOST_CA.read_text())
    (directory / "job.py").write_text("import os, sys\nprint('job', os.environ['SLURM_JOB_ID'], 'in', os.getcwd())\n"
                                      "sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)\n")
    run_cli("lock", cwd=directory, env=cli_env, check=0)
    built = cudabox("build", cwd=directory, env=cli_env)
    assert built.returncode in (0, 4), built.stderr[-3000:]  # 4: passed without a GPU
    return directory


def _slurm(project, env, *args, timeout=300):
    return cudabox("run", "--on", "slurm", *args, cwd=project, env=env, timeout=timeout)


def _job_id(stderr: str) -> str:
    return re.search(r"submitted Slurm job (\d+)", stderr).group(1)


@on_cluster
def test_output_streamed_and_exit_code_zero(project, cli_env, slurm_cluster):  # noqa: F811
    proc = _slurm(project, cli_env, "--partition", slurm_cluster["partition"], "--time", "5", "--",
                  "python", "-c", "import sys; sys.stdout.write('hello from slurm\\n'); "
                  "sys.stderr.write('to stderr\\n')")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["hello from slurm", "to stderr"]  # one file (order: docker's)
    job = _job_id(proc.stderr)
    assert job_state(job) == ("COMPLETED", "0:0")
    assert re.search(rf"Slurm job {job} (RUNNING on \S+|COMPLETED)", proc.stderr)


@on_cluster
def test_project_is_mounted_and_failure_reported(project, cli_env):  # noqa: F811
    proc = _slurm(project, cli_env, "--", "python", "job.py", "3")
    assert proc.returncode == 3
    job = _job_id(proc.stderr)
    assert proc.stdout == f"job {job} in /workspace\n"
    assert job_state(job) == ("FAILED", "3:0")
    assert f"Slurm job {job} FAILED on" in proc.stderr and "exit code 3:0" in proc.stderr


@on_cluster
def test_ctrl_c_cancels_the_job(project, cli_env, docker_client):  # noqa: F811
    command = [str(CUDABOX), "run", "--on", "slurm", "--", "python", "-c",
               "import time; print('started', flush=True); time.sleep(300)"]
    proc = subprocess.Popen(command, cwd=project, env=dict(os.environ, **cli_env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready and proc.stdout.readline() == "started\n"  # the job runs, its output streams
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    job = _job_id(err)
    assert f"cancelled Slurm job {job} (scancel)" in err
    assert job_state(job)[0] == "CANCELLED"
    assert not docker_client.containers.list(all=True, filters={"name": f"cudabox-{job}-"})  # no container left


@on_cluster
def test_detach_and_jobs(project, cli_env):  # noqa: F811
    proc = _slurm(project, cli_env, "--detach", "--", "python", "-c", "import time; time.sleep(1); print('bg')")
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    assert job.isdigit()
    listed = json.loads(run_cli("jobs", "--json", env=cli_env, check=0).stdout)["jobs"]
    mine = next(j for j in listed if j["job_id"] == job)
    assert mine["project"] == f"{TEST_PREFIX}slurm" and mine["name"] == f"cudabox-{TEST_PREFIX}slurm"
    assert mine["output"] == str(project / ".cudabox" / "slurm" / f"cudabox-{job}.out")
    deadline = time.monotonic() + 120
    while job_state(job)[0] not in ("COMPLETED", "FAILED") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert job_state(job) == ("COMPLETED", "0:0")
    assert (project / ".cudabox" / "slurm" / f"cudabox-{job}.out").read_text() == "bg\n"
    table = run_cli("jobs", env=cli_env, check=0).stdout
    assert re.search(rf"^\s*{job}\s+{TEST_PREFIX}slurm\s+COMPLETED\s+0:0", table, re.M)


@on_cluster
def test_ci_build_as_a_job_array(tmp_path, cli_env, slurm_cluster):  # noqa: F811
    junit = tmp_path / "junit.xml"
    proc = cudabox("ci", "build", "--on", "slurm", "-f", "cuda/cuda-12.8-py3.11", "-f", "cuda/cuda-12.9-py3.11",
                   "--ca-cert", HOST_CA, "--report-dir", tmp_path / "reports", "--junit", junit, cwd=tmp_path,
                   env=cli_env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"submitted Slurm array job \d+: 2 task\(s\)", proc.stderr)
    assert junit.read_text().count("<testcase ") == 2 and 'failures="0"' in junit.read_text()
    script = next((tmp_path / "reports").glob("cudabox-*.sh")).read_text()
    assert "#SBATCH --array=0-1" in script and '--filter "${images[$task]}"' in script


# --------------------------------------------------------------------------- export slurm (the script)


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    """A locked project; export needs neither the engine nor the cluster."""
    directory = tmp_path_factory.mktemp("export") / "proj"
    directory.mkdir()
    (directory / "cudabox.yaml").write_text(f'name: {TEST_PREFIX}slurm\npython: "3.11"\ncuda: "12.8"\n')
    run_cli("lock", cwd=directory, check=0)
    return directory


def test_export_script_shape_and_quoting(locked):
    evil = "it's $(touch /tmp/cb-test-pwned) `id` \"q\""
    proc = run_cli("export", "slurm", "--partition", "gpu", "--gpus", "2", "--time", "1-02:00:00", "--nodes", "1",
                   "--sbatch-arg", "--account=ml", "-e", "FOO=bar baz", "--", "python", "-c", evil, cwd=locked, check=0)
    script = proc.stdout
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=2", "#SBATCH --time=1-02:00:00",
                 "#SBATCH --nodes=1", "#SBATCH --account=ml", f"#SBATCH --job-name=cudabox-{TEST_PREFIX}slurm"):
        assert line in script.splitlines()
    assert re.search(rf"^#SBATCH --comment=cudabox:{TEST_PREFIX}slurm:[0-9a-f]{{12}}$", script, re.M)
    assert 'devices="${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}}"' in script
    assert "docker run" in script and "apptainer" in script and "--nv" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    # the command survives shell quoting byte for byte, and nothing in it ran
    prelude = "\n".join(line for line in script.splitlines() if line.startswith(("command=", "export FOO")))
    argv = subprocess.run(["bash", "-c", prelude + '\nprintf "%s\\0" "${command[@]}"; printf "%s" "$FOO"'],
                          capture_output=True, text=True).stdout.split("\0")
    assert argv == ["python", "-c", evil, "bar baz"]
    assert not os.path.exists("/tmp/cb-test-pwned")


@pytest.mark.parametrize("args, present", [
    (["--transport", "shared", "--shared-dir", "/shared/images"], 'docker load -q -i "$archive"'),
    (["--transport", "registry", "--registry", "registry.example.com/team"], 'docker pull -q "$image"'),
    (["--runtime", "pyxis"], '--container-image="$src"'),
    (["--runtime", "apptainer", "--transport", "registry", "--registry", "r.example.com"], 'src="docker://$image"'),
    (["--nodes", "2", "--transport", "shared", "--shared-dir", "/shared"], "srun --ntasks-per-node=1"),
])
def test_export_runtimes_and_transports(locked, args, present):
    script = run_cli("export", "slurm", *args, "--", "python", "job.py", cwd=locked, check=0).stdout
    assert present in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    if "registry" in args:
        image = re.search(r"^image=(\S+)$", script, re.M).group(1)
        assert shlex.split(image)[0].startswith(args[args.index("--registry") + 1] + "/cudabox/")


@pytest.mark.parametrize("args, message", [
    (["--partition", "a b"], "not a partition name"),
    (["--time", "soon"], "--time"),
    (["--transport", "shared"], "--shared-dir"),
    (["--transport", "carrier-pigeon"], "--transport"),
    (["--transport", "registry"], "--registry HOST/PATH"),
    (["--nodes", "2"], "one node only"),
    (["--sbatch-arg", "--account ml"], "--sbatch-arg"),
])
def test_export_refuses_bad_values(locked, args, message):
    assert message in run_cli("export", "slurm", *args, "--", "true", cwd=locked, check=2).stderr
