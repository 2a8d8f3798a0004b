"""`cudabox init`, `run`, `ps`/`logs`/`stop`/`exec` and `doctor` through the real CLI.

The init tests need no engine. The run tests (`docker` mark) build one slim
plain-CUDA image per session (Python 3.11 from the base image, the host CA for
PyPI) by running a first job, which also checks "image missing? build it".
cudabox runs as root here; ownership is checked with `--user 1234:1234` on a
project directory owned by that user, the situation of any non-root user.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cudabox.errors import InputError
from tests.docker_fixtures import HOST_CA, TEST_PREFIX, cudabox, docker_client, cli_env  # noqa: F401
from tests.support import CUDABOX, REPO, run_cli

PROJECTS = REPO / "tests" / "fixtures" / "projects"
USER = 1234
NAME = f"{TEST_PREFIX}run-{os.getpid()}"  # per session: its image is built here, whoever else runs tests


# --------------------------------------------------------------------------- init (no engine)


@pytest.mark.parametrize("name, framework", [("torch-requirements", "torch"), ("tf-pyproject", "tensorflow"),
                                             ("jax-conda", "jax")])
def test_init_writes_valid_files(tmp_path, name, framework):
    from cudabox.lock.lockfile import read_lock
    from cudabox.project.spec import load_spec

    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    # --no-packages: the frameworks' own indexes (download.pytorch.org) are not reachable from these machines
    proc = run_cli("init", "--yes", "--no-packages", project, check=0)
    assert "wrote cudabox.yaml, cudabox.lock, .dockerignore" in proc.stdout
    assert "host ignored (--no-host)" in proc.stdout  # what it assumed, said
    spec, lock = load_spec(project), read_lock(project)
    assert framework in lock.stack.framework_names and lock.stack.python == "3.11"
    assert spec.inputs_hash == lock.inputs_hash
    run_cli("lock", "--check", cwd=project, check=0)
    text = (project / "cudabox.yaml").read_text()
    assert text.count("\n# ") > 15  # commented: every key explained

    again = run_cli("init", "--yes", project, check=2)
    assert "cudabox.yaml exists; pass --force" in again.stderr
    (project / ".dockerignore").write_text("data/\n")
    forced = run_cli("init", "--yes", "--force", "--no-packages", project, check=0)
    assert "wrote cudabox.yaml, cudabox.lock, .dockerignore" in forced.stdout
    assert "data/" not in (project / ".dockerignore").read_text()


def test_init_keeps_the_projects_dockerignore_and_reports_json(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==2.5.*\n")
    (tmp_path / ".dockerignore").write_text("data/\n")
    proc = run_cli("init", "--yes", "--json", "--no-packages", "--python", "3.11", "--gpu", "RTX 4090", tmp_path,
                   check=0)
    out = json.loads(proc.stdout)
    assert out["kept"] == [".dockerignore"] and (tmp_path / ".dockerignore").read_text() == "data/\n"
    assert out["detected"]["requirements"] == ["torch==2.5.*"]
    assert out["stack"]["targets"][0]["sm"] == "sm_89"
    assert 'gpus: ["RTX 4090"]' in (tmp_path / "cudabox.yaml").read_text()


def test_init_without_anything_to_resolve_says_what_to_add(tmp_path):
    proc = run_cli("init", "--yes", tmp_path, check=2)
    assert "--cuda" in proc.stderr
    # issue #12: the user is never left empty-handed: the commented template, the reason at its top, no lock
    text = (tmp_path / "cudabox.yaml").read_text()
    assert text.startswith("# NOT LOCKED YET") and "nothing to resolve" in text and "--with torch" in text
    assert not (tmp_path / "cudabox.lock").exists()


def test_run_usage_errors(tmp_path):
    assert "No such option: --bogus" in run_cli("run", "--bogus", "--", "true", cwd=tmp_path, check=2).stderr
    assert "give the command after --" in run_cli("run", cwd=tmp_path, check=2).stderr
    assert "not a GPU index" in run_cli("run", "--gpus", "two", "--", "true", cwd=tmp_path, check=2).stderr
    assert "expected [IP:]" in run_cli("run", "-p", "x:y", "--", "true", cwd=tmp_path, check=2).stderr
    assert "cudabox init" in run_cli("run", "--", "true", cwd=tmp_path, check=2).stderr  # no cudabox.yaml
    # without --, options end at the command: its own flags are not cudabox's
    assert "cudabox init" in run_cli("run", "python", "-e", "x", cwd=tmp_path, check=2).stderr


# --------------------------------------------------------------------------- run's pieces (no engine)


def _stack(matrix, **spec):
    from cudabox.lock.resolution import resolve_project
    from cudabox.project.spec import spec_from_flags

    return resolve_project(spec_from_flags(Path("."), [], **spec), matrix=matrix, no_host=True).stack


def test_preflight_names_the_driver_needed(matrix):
    from cudabox.jobs.run import driver_problem

    stack = _stack(matrix, cuda="==12.8.*", python="==3.11.*")
    assert driver_problem(stack, "570.86.15") is None
    problem = driver_problem(stack, "550.54.15")
    assert "needs an NVIDIA driver >= 570.26 (cuda>=12.8)" in problem and "driver 550.54.15 is older" in problem
    # a lock made for an older driver uses minor-version compatibility: cuda>=12.0, the 12.x floor
    compat = _stack(matrix, cuda="==12.8.*", python="==3.11.*", driver="535.104.05")
    assert compat.driver_mode == "minor-compat" and compat.requirement == "cuda>=12.0"
    assert driver_problem(compat, "535.104.05") is None
    assert "470.57.02" in driver_problem(compat, "470.57.02")


def test_gpu_port_env_volume_parsing(tmp_path):
    from cudabox.engine import GpuAccess
    from cudabox.engine.docker import device_requests
    from cudabox.jobs.run import RunOptions, parse_env, parse_gpus, parse_ports, parse_volume

    assert parse_gpus("none") == () and device_requests(parse_gpus("none")) == []
    assert device_requests(parse_gpus("all"))[0]["Count"] == -1
    assert device_requests(parse_gpus("0,2"))[0]["DeviceIDs"] == ["0", "2"]
    assert device_requests(parse_gpus("GPU-1a2b3c4d-0000-1111-2222-333344445555"))[0]["DeviceIDs"][0].startswith("GPU-")
    cdi = device_requests(parse_gpus("0,2"), GpuAccess("cdi", "CDI"))[0]
    assert cdi["Driver"] == "cdi" and cdi["DeviceIDs"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=2"]
    with pytest.raises(InputError, match="not a GPU index"):
        parse_gpus("2 GPUs")
    assert parse_ports(["8888", "127.0.0.1:6006:6006", "9000:9001/udp", "0.0.0.0::7000"]) == (
        [(8888, "tcp"), (6006, "tcp"), (9001, "udp"), (7000, "tcp")],
        {"8888/tcp": ("127.0.0.1", 8888), "6006/tcp": ("127.0.0.1", 6006), "9001/udp": ("127.0.0.1", 9000),
         "7000/tcp": ("0.0.0.0",)})  # loopback unless an address is given; -p 8888 keeps the number
    with pytest.raises(InputError, match="-p 70000"):
        parse_ports(["70000"])
    assert parse_volume("data:/data:ro") == "data:/data:ro"
    assert parse_volume("./d:/d") == f"{Path.cwd() / 'd'}:/d:rw"
    with pytest.raises(InputError, match="-v /only"):
        parse_volume("/only")
    (tmp_path / "e.env").write_text("A=1\n# no\nB\n")
    env = parse_env(RunOptions(env=["C=x=y", "D", "NCCL_DEBUG=WARN"], env_files=[tmp_path / "e.env"]),
                    environ={"B": "from-host", "D": "d", "CUDA_VISIBLE_DEVICES": "1", "NCCL_IB_DISABLE": "1",
                             "SECRET": "no"})
    assert env == {"CUDA_VISIBLE_DEVICES": "1", "NCCL_IB_DISABLE": "1", "A": "1", "B": "from-host", "C": "x=y",
                   "D": "d", "NCCL_DEBUG": "WARN"}
    with pytest.raises(InputError, match="-e: '1BAD=x'"):
        parse_env(RunOptions(env=["1BAD=x"]), environ={})
    from cudabox.jobs.run import shm_size

    assert shm_size("16g") == 16 << 30 and shm_size(None) is None
    with pytest.raises(InputError, match="--shm-size 16q: "):
        shm_size("16q")


# --------------------------------------------------------------------------- run (a real engine)


@pytest.fixture(scope="session")
def project(docker_client, cli_env, tmp_path_factory):  # noqa: F811
    """A slim plain-CUDA project owned by USER; its image is built by the first job."""
    directory = tmp_path_factory.mktemp("run") / "proj"
    directory.mkdir()
    (directory / "cudabox.yaml").write_text(f'name: {NAME}\npython: "3.11"\ncuda: "12.8"\n'
                                            "ca_cert: host-ca.pem\n")  # inside the project
    (directory / "host-ca.pem").write_text(HOST_CA.read_text())
    (directory / "hello.py").write_text("import sys\nprint('hello from the stack')\nsys.exit(7)\n")
    first = cudabox("run", "--", "python", "-c", "print('built')", cwd=directory, env=cli_env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "no cudabox.lock yet: locked" in first.stderr and "not built yet: building" in first.stderr
    assert first.stdout == "built\n"
    for path in [directory, *directory.rglob("*")]:
        os.chown(path, USER, USER)
    return directory


def _run(project, *args, env, extra_env=None):
    return cudabox("run", *args, cwd=project, env=env, extra_env=extra_env, timeout=300)


def _leftovers(client, name=None):
    """This session's job containers (the engine is shared: other sessions' jobs come and go)."""
    found = client.containers.list(all=True, filters={"label": ["io.cudabox.run", f"io.cudabox.project={NAME}"]})
    return [c.name for c in found if name is None or c.name == name]


@pytest.mark.docker
def test_output_and_exit_code(project, cli_env, docker_client):  # noqa: F811
    proc = _run(project, "--", "python", "hello.py", env=cli_env)
    assert proc.returncode == 7
    assert proc.stdout == "hello from the stack\n"
    proc = _run(project, "--", "python", "-c", "import sys; print('to stderr', file=sys.stderr)", env=cli_env)
    assert proc.returncode == 0 and proc.stdout == "" and "to stderr" in proc.stderr
    assert _leftovers(docker_client) == []  # every job's container removed


@pytest.mark.docker
def test_files_written_to_the_mount_belong_to_the_user(project, cli_env):  # noqa: F811
    script = ("import os; open('/workspace/out.txt', 'w').write('x'); "
              "open(os.path.expanduser('~/.probe'), 'w').write('home is writable'); "
              "print(os.getcwd(), os.environ['HOME'], os.getuid(), os.getgid())")
    proc = _run(project, "--user", f"{USER}:{USER}", "--", "python", "-c", script, env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["/workspace", "/home/cudabox", str(USER), str(USER)]
    st = (project / "out.txt").stat()
    assert (st.st_uid, st.st_gid) == (USER, USER)
    (project / "out.txt").unlink()
    # by default the job runs as the invoking user (root here)
    proc = _run(project, "--", "python", "-c", "import os; print(os.getuid())", env=cli_env)
    assert proc.stdout.strip() == str(os.getuid())


@pytest.mark.docker
def test_environment(project, cli_env, tmp_path):  # noqa: F811
    env_file = tmp_path / "job.env"
    env_file.write_text("# comment\nFROM_FILE=file value\n")
    script = ("import os; print(*[os.environ.get(k, '-') for k in ('FOO', 'FROM_HOST', 'FROM_FILE', "
              "'CUDA_VISIBLE_DEVICES', 'HF_TOKEN', 'NOT_PASSED', 'HF_HOME', 'PIP_CACHE_DIR')], sep='|')")
    proc = _run(project, "-e", "FOO=bar=baz", "-e", "FROM_HOST", "--env-file", env_file, "--", "python", "-c",
                script, env=cli_env, extra_env={"FROM_HOST": "host", "CUDA_VISIBLE_DEVICES": "1,3",
                                                "HF_TOKEN": "hf_secret", "NOT_PASSED": "x"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().split("|") == ["bar=baz", "host", "file value", "1,3", "hf_secret", "-",
                                              "/cache/huggingface", "/cache/pip"]
    cache = Path(cli_env["XDG_CACHE_HOME"])
    assert (cache / "pip").is_dir() and (cache / "huggingface").is_dir()  # the host's caches, mounted


@pytest.mark.docker
def test_ctrl_c_stops_the_job_and_removes_the_container(project, cli_env, docker_client):  # noqa: F811
    name = f"{NAME}-sigint"
    proc = subprocess.Popen([str(CUDABOX), "run", "--name", name, "--", "sleep", "60"], cwd=project,
                            env=dict(os.environ, **cli_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = docker_client.containers.list(filters={"name": name, "status": "running"})
        if running:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    else:
        pytest.fail("the job never started")
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 10  # the job ended at once, not after its 60 s
    assert _leftovers(docker_client, name) == []


@pytest.mark.docker
def test_detach_ps_logs_exec_stop(project, cli_env, docker_client):  # noqa: F811
    name = f"{NAME}-detached"
    proc = _run(project, "--detach", "--name", name, "--", "sh", "-c", "echo started; echo oops >&2; sleep 60",
                env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == name
    try:
        jobs = json.loads(cudabox("ps", "--json", cwd=project, env=cli_env).stdout)["jobs"]
        assert [j["project"] for j in jobs if j["name"] == name] == [NAME]
        deadline = time.monotonic() + 10
        while "started" not in (logs := cudabox("logs", name, cwd=project, env=cli_env)).stdout:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert "oops" in logs.stderr and "oops" not in logs.stdout
        ex = cudabox("exec", name, "--", "sh", "-c", "echo $HOME; exit 3", cwd=project, env=cli_env)
        assert (ex.returncode, ex.stdout) == (3, "/home/cudabox\n")
        stopped = cudabox("stop", "-t", "1", name, cwd=project, env=cli_env)
        assert stopped.returncode == 0 and stopped.stdout.strip() == name
        assert _leftovers(docker_client, name) == []
        assert cudabox("logs", name, cwd=project, env=cli_env).returncode == 2
    finally:
        for c in docker_client.containers.list(all=True, filters={"name": name}):
            c.remove(force=True)


@pytest.mark.docker
def test_notebook_shaped_job_is_reached_through_the_published_port(project, cli_env, docker_client):  # noqa: F811
    """`cudabox run -p PORT -- <server>` (as `jupyter lab --ip 0.0.0.0`): the host reaches the server on
    127.0.0.1:PORT, and only there; Ctrl-C ends it and leaves no container."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = f"{NAME}-notebook"
    job = subprocess.Popen([str(CUDABOX), "run", "-p", str(port), "--name", name, "--", "python", "-m",
                            "http.server", str(port), "--bind", "0.0.0.0"], cwd=project,
                           env=dict(os.environ, **cli_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, body = time.monotonic() + 60, None
        while body is None:
            assert job.poll() is None, job.communicate()
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/hello.py", timeout=2).read().decode()
            except OSError:
                assert time.monotonic() < deadline, "the server never answered on the published port"
                time.sleep(0.3)
        assert "hello from the stack" in body  # served from the mounted project
        bindings = docker_client.containers.get(name).attrs["HostConfig"]["PortBindings"]
        assert bindings == {f"{port}/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
        job.send_signal(signal.SIGINT)
        job.wait(timeout=60)
        assert _leftovers(docker_client, name) == []
    finally:
        if job.poll() is None:
            job.kill()
        for c in docker_client.containers.list(all=True, filters={"name": name}):
            c.remove(force=True)


@pytest.mark.docker
def test_stale_lock_is_relocked(project, cli_env):  # noqa: F811
    spec = project / "cudabox.yaml"
    original = spec.read_text()
    try:
        spec.write_text(original + "# a comment changes the file, not the stack\n")
        proc = _run(project, "--", "true", env=cli_env)
        assert proc.returncode == 0, proc.stderr
        assert "cudabox.yaml changed since cudabox.lock was written: re-locked (same stack)" in proc.stderr
        assert "building" not in proc.stderr
        run_cli("lock", "--check", cwd=project, env=cli_env, check=0)
    finally:
        spec.write_text(original)


@pytest.mark.docker
def test_gpu_requests_without_gpu_support(project, cli_env, docker_client):  # noqa: F811
    proc = _run(project, "--gpus", "all", "--", "true", env=cli_env)
    assert proc.returncode == 5 and "nvidia-container-toolkit" in proc.stderr and "--gpus none" in proc.stderr
    # preflight: the host driver is too old for the image's CUDA 12.8
    proc = _run(project, "--gpus", "0", "--", "true", env=cli_env,
                extra_env={"CUDABOX_NO_HOST": "", "CUDABOX_DRIVER_VERSION": "470.57.02"})
    assert proc.returncode == 5
    assert "needs an NVIDIA driver >= 570" in proc.stderr and "470.57.02" in proc.stderr
    assert _leftovers(docker_client) == []


@pytest.mark.docker
def test_doctor_json(project, cli_env):  # noqa: F811
    proc = cudabox("doctor", "--json", cwd=project, env=cli_env, extra_env={"CUDABOX_NO_HOST": ""})
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert proc.returncode == 0 and report["ok"] is True
    assert checks["engine"]["status"] == "ok" and "Docker Engine" in checks["engine"]["detail"]
    assert checks["buildkit"]["status"] in ("ok", "warn")
    assert checks["gpu-runtime"]["status"] == "warn" and "nvidia-container-toolkit" in checks["gpu-runtime"]["fix"]
    assert checks["driver"]["status"] == "warn" and checks["driver"]["fix"]
    assert checks["project"]["status"] == "warn" and "570" in checks["project"]["detail"]
    assert checks["image"]["status"] == "ok"
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in report["checks"])
