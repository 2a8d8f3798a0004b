"""SIGINT, SIGTERM and SIGHUP at several moments of build, validate, run, run -d and lock, on the real engine.

Each ends with the promised exit code (130 / 143 / 129, or 0 when the work was already done), one line
saying what was interrupted, and nothing left behind: no builder child, no smoke-test or job container,
no dangling image from the interrupted build, no secret file, no half-written lock (issue #16).
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.docker_fixtures import HOST_CA, cli_env, cudabox, docker_client, make_project  # noqa: F401
from tests.support import CUDABOX

pytestmark = pytest.mark.docker

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
BASE_YAML = 'python: "3.11"\ncuda: "12.8"\n'  # the stack test_run.py and test_slurm.py build too: shared
SECRET_ENV = {"CUDABOX_CA_CERT": str(HOST_CA), "CUDABOX_PIP_INDEX_URL": "https://pypi.org/simple"}


@pytest.fixture(scope="module")
def built(docker_client, cli_env, tmp_path_factory):  # noqa: F811
    """A project whose stack and image exist (the starting point of every case)."""
    name = f"cb-test-sig-{uuid.uuid4().hex[:6]}"
    directory = make_project(tmp_path_factory.mktemp("signals") / "proj", f"name: {name}\n{BASE_YAML}", cli_env)
    proc = cudabox("build", "--no-validate", cwd=directory, env=cli_env, extra_env=SECRET_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return directory, name


def _start(directory, env, *args, extra_env=None):
    return subprocess.Popen([str(CUDABOX), *args], cwd=directory, env={**os.environ, **env, **(extra_env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _until(proc, marker: str, timeout: float = 600) -> str:
    """Read the command's output until `marker` shows (the moment to send the signal)."""
    seen = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return "".join(seen)
        assert time.monotonic() < deadline, "".join(seen)[-3000:]
    raise AssertionError(f"ended before {marker!r}:\n{''.join(seen)[-3000:]}")


def _catching(proc, sig, timeout: float = 60) -> None:
    """Wait until the process catches `sig` (/proc/PID/status SigCgt): from then on cudabox owns the signal.
    Before it, the interpreter is still starting and the kernel's default applies (nothing to clean yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        caught = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
        if caught & (1 << (sig - 1)):
            return
        assert proc.poll() is None, "ended before it caught the signal"
        time.sleep(0.005)
    raise AssertionError(f"{sig.name} never caught")


def _builder_running(proc, timeout: float = 300) -> None:
    """Wait until the command's `docker build` child runs (its progress view prints no step output)."""
    deadline = time.monotonic() + timeout
    while not subprocess.run(["pgrep", "-s", str(proc.pid), "-f", "docker build"], capture_output=True).stdout:
        assert proc.poll() is None and time.monotonic() < deadline, "no builder started"
        time.sleep(0.1)
    time.sleep(2)  # into the build


def _finish(proc, sig) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # don't leave it behind; the test fails below
        out = proc.communicate()[0] + "\n(still running 120 s after the signal: killed)"
    return proc.returncode, out


def _children_gone(pid: int) -> None:
    """No process of the interrupted command's session is left (the docker build child included)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-s", str(pid)], capture_output=True, text=True).stdout.split()
        if not left:
            return
        time.sleep(0.5)
    raise AssertionError(f"processes left in the session of {pid}: {left}")


def _containers(client, label: str) -> list:
    return client.containers.list(all=True, filters={"label": label}, sparse=True)  # no inspect: no race


def _pause(client, cid: str) -> bool:
    """Pause a container as soon as it runs (a created one can't be paused yet); False when it is gone."""
    import docker

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            client.api.pause(cid)
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError:
            try:
                status = client.api.inspect_container(cid)["State"].get("Status")
            except docker.errors.NotFound:
                return False
            if status in ("exited", "dead", "removing"):
                return False
            time.sleep(0.01)  # created, not yet running
    return False


def _last_line(out: str) -> str:
    return out.strip().splitlines()[-1]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_build_interrupted_in_a_build_step(built, docker_client, cli_env, sig):
    directory, name = built
    nonce = uuid.uuid4().hex[:8]
    (directory / "cudabox.yaml").write_text(f"name: {name}\n{BASE_YAML}run: ['echo step-{nonce} && sleep 120']\n")
    assert cudabox("lock", cwd=directory, env=cli_env).returncode == 0
    proc = _start(directory, cli_env, "build", "--plain", extra_env=SECRET_ENV)
    _until(proc, f"step-{nonce}")
    secrets = glob.glob(f"/tmp/cudabox-secrets-{proc.pid}-*")
    assert secrets, "the build holds its index URL in a secret file meanwhile"
    code, out = _finish(proc, sig)
    assert code == 128 + sig, out[-3000:]
    assert f"`cudabox build` interrupted ({sig.name})" in _last_line(out), out[-2000:]
    _children_gone(proc.pid)
    assert not any(os.path.exists(s) for s in secrets)
    assert not docker_client.images.list(filters={"label": f"io.cudabox.project={name}", "dangling": True})
    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    tags = {t for i in docker_client.images.list(name=f"cudabox/{name}") for t in i.tags}
    assert project_tag(read_lock(directory), project_dir=directory) not in tags  # nothing was tagged
    (directory / "cudabox.yaml").write_text(f"name: {name}\n{BASE_YAML}")
    assert cudabox("lock", cwd=directory, env=cli_env).returncode == 0


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8])
def test_build_interrupted_early(built, docker_client, cli_env, delay):
    """Before the builder starts (imports, lock check, render): nothing to clean, the same exit code."""
    directory, name = built
    (directory / "cudabox.yaml").write_text(f"name: {name}\n{BASE_YAML}run: ['sleep 120']\n")
    assert cudabox("lock", cwd=directory, env=cli_env).returncode == 0
    proc = _start(directory, cli_env, "build", "--plain", extra_env=SECRET_ENV)
    _catching(proc, signal.SIGTERM)
    time.sleep(delay)
    code, out = _finish(proc, signal.SIGTERM)
    assert code == 143, out[-3000:]
    assert "interrupted (SIGTERM)" in _last_line(out) and "Traceback" not in out, out[-2000:]
    _children_gone(proc.pid)
    assert not glob.glob(f"/tmp/cudabox-secrets-{proc.pid}-*")
    (directory / "cudabox.yaml").write_text(f"name: {name}\n{BASE_YAML}")
    assert cudabox("lock", cwd=directory, env=cli_env).returncode == 0


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_validate_interrupted_removes_its_container(built, docker_client, cli_env, sig):
    directory, _ = built
    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    tag = project_tag(read_lock(directory), project_dir=directory)
    label = f"io.cudabox.smoke={tag}"
    for _ in range(5):  # the smoke test takes seconds; paused once seen, so the signal lands while it runs
        proc = _start(directory, cli_env, "validate", "--no-gpu")
        deadline = time.monotonic() + 120
        while not (running := _containers(docker_client, label)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-2000:]
            time.sleep(0.02)
        if _pause(docker_client, running[0].id):
            break
        proc.communicate(timeout=120)  # it ended before we could hold it: again
    else:
        pytest.fail("the smoke-test container never stayed long enough to be paused")
    code, out = _finish(proc, sig)
    # it carried the job label meanwhile: what `cudabox ps` / `cudabox stop` list
    labels = running[0].attrs.get("Labels") or {}
    assert labels.get("io.cudabox.run") == "1", labels
    assert code == 128 + sig, out[-3000:]
    assert f"`cudabox validate` interrupted ({sig.name})" in _last_line(out), out[-2000:]
    assert not _containers(docker_client, label)


def test_run_interrupted_while_it_builds_first(built, docker_client, cli_env):
    directory, name = built
    nonce = uuid.uuid4().hex[:8]
    (directory / "cudabox.yaml").write_text(f"name: {name}\n{BASE_YAML}run: ['echo step-{nonce} && sleep 120']\n")
    proc = _start(directory, cli_env, "run", "--", "true", extra_env=SECRET_ENV)
    _builder_running(proc)
    code, out = _finish(proc, signal.SIGTERM)
    assert code == 143, out[-3000:]
    assert "`cudabox run` interrupted (SIGTERM)" in _last_line(out), out[-2000:]
    _children_gone(proc.pid)
    assert not glob.glob(f"/tmp/cudabox-secrets-{proc.pid}-*")
    assert not _containers(docker_client, f"io.cudabox.project={name}")
    assert not docker_client.images.list(filters={"label": f"io.cudabox.project={name}", "dangling": True})
    (directory / "cudabox.yaml").write_text(f"name: {name}\n{BASE_YAML}")
    assert cudabox("lock", cwd=directory, env=cli_env).returncode == 0


@pytest.mark.parametrize("delay", [0.0, 0.2, 0.5, 0.8, 1.2, 2.0])
def test_run_detached_is_all_or_nothing(built, docker_client, cli_env, delay):
    """`run -d` cut at any moment: a running job and exit 0, or no job and 143; never a job with 143."""
    directory, name = built
    job = f"cb-test-sig-job-{uuid.uuid4().hex[:6]}"
    proc = _start(directory, cli_env, "run", "-d", "--name", job, "--", "sleep", "300")
    _catching(proc, signal.SIGTERM)
    time.sleep(delay)
    code, out = _finish(proc, signal.SIGTERM)
    try:
        container = docker_client.containers.list(all=True, filters={"name": f"^/{job}$"})
        if code == 0:
            assert container and container[0].status == "running", out
        else:
            assert code == 143 and not container, (code, out, container)
            assert "interrupted (SIGTERM)" in _last_line(out), out
    finally:
        for c in docker_client.containers.list(all=True, filters={"name": f"^/{job}$"}):
            c.remove(force=True)


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3, 0.6])
def test_lock_interrupted_leaves_the_old_lock_or_the_new_one(tmp_path, cli_env, delay):
    directory = tmp_path / "proj"
    directory.mkdir()
    (directory / "cudabox.yaml").write_text(BASE_YAML)
    assert cudabox("lock", cwd=directory, env=cli_env).returncode == 0
    old = (directory / "cudabox.lock").read_text()
    (directory / "cudabox.yaml").write_text(BASE_YAML + "system_packages: [git]\n")
    proc = _start(directory, cli_env, "lock")
    _catching(proc, signal.SIGHUP)
    time.sleep(delay)
    code, out = _finish(proc, signal.SIGHUP)
    assert code in (0, 129), out
    text = (directory / "cudabox.lock").read_text()
    if code == 129:
        assert text == old and "interrupted (SIGHUP)" in _last_line(out), out
    else:
        assert '"git"' in text
    assert not list(directory.glob(".cudabox.lock.*.tmp"))


def test_after_kill_9_the_next_ps_removes_the_ended_job(built, docker_client, cli_env):
    """kill -9 skips every cleanup: the job's container outlives `cudabox run`; once it has ended, the next
    `cudabox ps` (or run) removes it. A detached job is no orphan: it stays."""
    directory, name = built
    proc = _start(directory, cli_env, "run", "--", "sh", "-c", "sleep 4")
    deadline = time.monotonic() + 300
    def mine(c) -> bool:
        return (c.attrs.get("Labels") or {}).get("io.cudabox.run.client", "").endswith(f":{proc.pid}")

    while not (found := [c for c in _containers(docker_client, f"io.cudabox.project={name}") if mine(c)]):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-2000:]
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    container = found[0]
    container.wait(timeout=60)  # the orphan ends by itself
    detached = cudabox("run", "-d", "--", "true", cwd=directory, env=cli_env)
    assert detached.returncode == 0, detached.stderr
    time.sleep(1)
    ps = cudabox("ps", "-a", "--json", cwd=directory, env=cli_env)
    assert ps.returncode == 0, ps.stderr
    left = {c.id for c in _containers(docker_client, f"io.cudabox.project={name}")}
    assert container.id not in left  # reaped
    job = detached.stdout.strip()
    assert job in ps.stdout  # the detached one stays for `cudabox logs`
    cudabox("stop", job, cwd=directory, env=cli_env)
    for c in docker_client.containers.list(all=True, filters={"name": f"^/{job}$"}):
        c.remove(force=True)


def test_ci_build_interrupted_stops_the_builders_of_its_worker_threads(docker_client, cli_env, tmp_path):
    """`ci build` builds in worker threads; the signal reaches the main thread, which stops their builders."""
    import shutil

    from tests.support import REPO
    from tests.test_ci import SMALL

    catalog = tmp_path / "images"
    shutil.copytree(REPO / "images" / "_support", catalog / "_support")
    shutil.copytree(REPO / "images" / SMALL[0], catalog / SMALL[0])
    dockerfile = catalog / SMALL[0] / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(
        "COPY _support/smoke.py", f"RUN echo cb-test-sig-{uuid.uuid4().hex[:6]} && sleep 300\nCOPY _support/smoke.py", 1))
    proc = _start(tmp_path, cli_env, "ci", "build", "--catalog", catalog, "--ca-cert", HOST_CA,
                  "--registry", "cb-test-ci-sig")
    _builder_running(proc, timeout=900)
    started = time.monotonic()
    code, out = _finish(proc, signal.SIGTERM)
    assert code == 143, out[-3000:]
    assert time.monotonic() - started < 60, "waited for the build instead of stopping it"
    assert "`cudabox ci` interrupted (SIGTERM)" in _last_line(out), out[-2000:]
    _children_gone(proc.pid)
    assert not docker_client.images.list(name="cb-test-ci-sig/cuda")
