"""`cudabox build` / `validate` / `images ls` on a real Docker engine (no mocks).

Every image here is built from the local debian:bookworm-slim (no registry is
reachable), by the same Dockerfiles users get. PyPI is reachable from inside
a build only with the host's CA bundle, passed as a BuildKit secret. Images are
built once per session (fixtures) and shared; the stack images stay in the
engine afterwards as cache, the test projects' images are removed.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.docker_fixtures import (HOST_CA, cli_env, cuda_wheel_libs, cudabox, docker_client,  # noqa: F401
                                   make_project, openssl_cert, registry)
from tests.support import REPO

pytestmark = pytest.mark.docker

GPUS = '[A100, "RTX 4090", "RTX 5090"]'  # the example's GPUs: projects with them share one stack image
CA = {"CUDABOX_CA_CERT": str(HOST_CA)}


def build(directory, env, *args, extra_env=None, check=0):
    """`cudabox build --json ARGS` -> (result dict, stderr)."""
    proc = cudabox("build", "--json", *args, cwd=directory, env=env, extra_env=extra_env)
    assert proc.returncode == check, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout), proc.stderr


# --------------------------------------------------------------------------- session builds


@pytest.fixture(scope="session")
def cuda128(docker_client, cli_env, tmp_path_factory):
    """(a) a plain CUDA 12.8 stack (NVIDIA's runtime + NVRTC wheels), built with --ca-cert.

    The CA file is the host bundle plus a fresh certificate that exists nowhere else (for the leak test),
    and a `run:` step uses the secret to reach PyPI and prints a per-session nonce from the project's files:
    a new nonce changes the COPY of the files, so that step really runs with the secret mounted even when
    every other step comes from the cache (and cudabox.yaml, hence the tag, stays the same)."""
    root = tmp_path_factory.mktemp("cuda128")
    nonce = uuid.uuid4().hex[:12]
    marker = openssl_cert(f"cudabox-leak-test-{nonce}", root)
    ca = root / "ca-bundle.pem"
    ca.write_text(HOST_CA.read_text() + marker)
    project = make_project(root / "project", f"""name: cb-test-cuda128
python: "3.11"
cuda: "12.8"
gpus: {GPUS}
run:
  - >-
    python -c "import ssl, urllib.request; urllib.request.urlopen('https://pypi.org/simple/pip/',
    context=ssl.create_default_context(cafile='/run/secrets/ca_cert'), timeout=60)"
    && echo "ca-secret-worked-$(cat nonce.txt)"
""", cli_env, files={"main.py": "print('hello')\n", "nonce.txt": nonce})
    result, log = build(project, cli_env, "--ca-cert", str(ca), "--plain")
    return SimpleNamespace(dir=project, result=result, log=log, ca=ca, marker=marker, nonce=nonce)


@pytest.fixture(scope="session")
def cuda124(docker_client, cli_env, tmp_path_factory):
    """A CUDA 12.4 stack for GPUs it can target (no Blackwell), built with the CA from CUDABOX_CA_CERT."""
    project = make_project(tmp_path_factory.mktemp("cuda124") / "project", """name: cb-test-cuda124
python: "3.11"
cuda: "12.4"
gpus: [A100, "RTX 4090"]
""", cli_env)
    result, _ = build(project, cli_env, extra_env=CA)
    return SimpleNamespace(dir=project, result=result)


@pytest.fixture(scope="session")
def saxpy(cuda128, docker_client, cli_env, tmp_path_factory):
    """(b) the bundled example, copied as is; built after cuda128, whose stack it shares."""
    project = tmp_path_factory.mktemp("saxpy") / "saxpy"
    shutil.copytree(REPO / "examples" / "saxpy", project)
    cudabox("lock", cwd=project, env=cli_env)
    result, _ = build(project, cli_env, extra_env=CA)
    return SimpleNamespace(dir=project, result=result)


# --------------------------------------------------------------------------- (a) plain CUDA 12.x stacks


def test_plain_cuda_12_8_builds_and_passes_without_gpu(cuda128, cli_env):
    r = cuda128.result
    assert r["builder"].startswith("BuildKit")
    assert r["image"].startswith("cudabox/cb-test-cuda128:") and r["stack"]["image"].startswith("cudabox/stack:")
    assert r["validation"]["status"] == "passed-without-gpu"
    assert f"ca-secret-worked-{cuda128.nonce}" in cuda128.log  # the run step reached PyPI through the secret

    proc = cudabox("validate", "--json", cwd=cuda128.dir, env=cli_env)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "passed-without-gpu" and report["gpu"] is False
    assert "no NVIDIA runtime" in report["gpu_reason"]  # it says why nothing ran on a GPU
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["cudart"]["status"] == "pass" and "12.8" in checks["cudart"]["detail"]
    assert checks["nvrtc"]["status"] == "pass" and "sm_120" in checks["nvrtc"]["detail"]
    assert Path(report["path"]).name == report["image_id"].split(":")[1] + ".json"

    human = cudabox("validate", "--target", "sm_120", cwd=cuda128.dir, env=cli_env)
    assert human.returncode == 4, human.stdout + human.stderr
    assert "result: passed-without-gpu (exit 4)" in human.stdout


def test_cuda_12_4_validates_but_refuses_sm_120(cuda124, cli_env):
    assert cuda124.result["validation"]["status"] == "passed-without-gpu"
    assert cudabox("validate", cwd=cuda124.dir, env=cli_env).returncode == 4
    proc = cudabox("validate", "--target", "sm_120", cwd=cuda124.dir, env=cli_env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fail = [line for line in proc.stdout.splitlines() if line.strip().startswith("FAIL")]
    assert len(fail) == 1 and "nvrtc" in fail[0] and "NVRTC 12.4" in fail[0] and "sm_120" in fail[0], proc.stdout
    assert "result: failed (exit 1)" in proc.stdout


def test_images_ls_shows_built_images_with_their_status(cuda128, cuda124, cli_env):
    proc = cudabox("images", "ls", "--json", cwd=cuda128.dir, env=cli_env)
    assert proc.returncode == 0, proc.stderr
    rows = {tag: row for row in json.loads(proc.stdout)["images"] for tag in row["tags"]}
    project = rows[cuda128.result["image"]]
    assert project["kind"] == "project" and project["validation"] == "passed-without-gpu"
    assert rows[cuda128.result["stack"]["image"]]["kind"] == "stack"
    table = cudabox("images", "ls", cwd=cuda128.dir, env=cli_env).stdout
    assert any(line.startswith(cuda124.result["image"]) and "passed-without-gpu" in line
               for line in table.splitlines()), table


# --------------------------------------------------------------------------- (b) the example project


def test_example_project_builds_on_the_shared_stack_and_runs(saxpy, cuda128, docker_client):
    r = saxpy.result
    assert r["stack"]["image"] == cuda128.result["stack"]["image"]  # same stack, one image
    assert r["stack"]["reused"] is True
    assert r["validation"]["status"] == "passed-without-gpu"
    out = docker_client.containers.run(r["image"], ["python", "saxpy.py", "sm_120"], remove=True).decode()
    assert "NVRTC 12.8 compiled saxpy for sm_120" in out and "no GPU visible" in out, out


# --------------------------------------------------------------------------- (c) the CA certificate leak test


def test_ca_certificate_is_in_no_layer(cuda128, docker_client, tmp_path):
    body = [line for line in cuda128.marker.splitlines() if line and not line.startswith("-----")]
    needles = [line.encode() for line in (body[1], body[len(body) // 2], body[-2])]  # unique to this cert
    saved = tmp_path / "image.tar"
    with saved.open("wb") as fh:
        for chunk in docker_client.images.get(cuda128.result["image"]).save(named=True):
            fh.write(chunk)
    layers = secret_files = 0
    with tarfile.open(saved) as outer:
        for member in outer.getmembers():
            if not member.isfile():
                continue
            data = outer.extractfile(member).read()
            assert not any(n in data for n in needles), f"certificate content found in {member.name}"
            if member.name.endswith("layer.tar"):
                layers += 1
                with tarfile.open(fileobj=outer.extractfile(member)) as layer:
                    names = [m.name for m in layer.getmembers() if m.isfile()]
                    secret_files += sum(n.startswith("run/secrets/") for n in names)
    assert layers >= 5 and secret_files == 0  # no file under /run/secrets in any layer


# --------------------------------------------------------------------------- (d) failed builds


def test_failed_build_names_the_step_and_tags_nothing(docker_client, cli_env, cuda128, tmp_path):
    project = make_project(tmp_path / "fail", f"""name: cb-test-fail
python: "3.11"
cuda: "12.8"
gpus: {GPUS}
run:
  - "echo about-to-fail; exit 3"
""", cli_env)
    proc = cudabox("build", cwd=project, env=cli_env, extra_env=CA)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cudabox: error:")]
    assert len(errors) == 1, proc.stderr
    assert "build failed at [" in errors[0] and "] RUN echo about-to-fail; exit 3" in errors[0]
    assert "(exit code 3)" in errors[0]
    assert "  - about-to-fail" in proc.stderr  # the step's last output lines follow
    assert docker_client.images.list(name="cudabox/cb-test-fail") == []
    assert docker_client.images.list(all=True, filters={"label": "io.cudabox.project=cb-test-fail"}) == []


def test_legacy_builder_refuses_a_ca_certificate(cuda128, cli_env):
    proc = cudabox("build", "--ca-cert", str(HOST_CA), cwd=cuda128.dir, env=cli_env,
                   extra_env={"CUDABOX_BUILDER": "legacy"})
    assert proc.returncode == 5, proc.stderr
    assert "--ca-cert needs BuildKit build secrets" in proc.stderr


def test_legacy_builder_failure_is_one_clear_line(docker_client, cli_env, tmp_path):
    """The legacy builder can't pass the CA, so here its stack build fails when pip meets the proxy."""
    project = make_project(tmp_path / "legacy-fail", """name: cb-test-legacy-fail
python: "3.11"
cuda: "12.6"
gpus: [T4]
""", cli_env)
    stack_tag = "cudabox/stack:" + json.loads((project / "cudabox.lock").read_text())["stack_hash"][:16]
    if docker_client.images.list(name=stack_tag):  # built by hand with BuildKit? then the test can't fail
        docker_client.images.remove(stack_tag)
    proc = cudabox("build", cwd=project, env=cli_env, extra_env={"CUDABOX_BUILDER": "legacy"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cudabox: error:")]
    assert len(errors) == 1 and "build failed at [" in errors[0] and "(exit code 1)" in errors[0], proc.stderr
    # the uv stage fetches the lock's uv wheel by URL (tools-<digest>.txt): the proxy's certificate stops it
    assert "tools-" in proc.stderr and "CERTIFICATE_VERIFY_FAILED" in proc.stderr, proc.stderr[-3000:]
    assert docker_client.images.list(name=stack_tag) == []


# --------------------------------------------------------------------------- reuse and rebuilds


def test_code_change_rebuilds_only_the_last_layers(saxpy, docker_client, cli_env, tmp_path):
    project = tmp_path / "edit"
    shutil.copytree(saxpy.dir, project, ignore=shutil.ignore_patterns(".cudabox"))
    yaml_text = (project / "cudabox.yaml").read_text().replace("name: saxpy", "name: cb-test-edit")
    (project / "cudabox.yaml").write_text(yaml_text)
    cudabox("lock", cwd=project, env=cli_env)
    first, _ = build(project, cli_env, "--no-validate")
    assert first["stack"]["reused"] is True

    same, _ = build(project, cli_env, "--no-validate")
    assert same["reused"] is True and same["steps"] == [] and same["image_id"] == first["image_id"]

    with (project / "saxpy.py").open("a") as fh:
        fh.write(f"# an edit {uuid.uuid4().hex}\n")  # new content: not in the build cache from an earlier run
    started = time.monotonic()
    second, _ = build(project, cli_env, "--no-validate")
    seconds = time.monotonic() - started
    assert second["reused"] is False and second["image_id"] != first["image_id"]
    assert second["stack"] == first["stack"]  # the stack image was neither rebuilt nor replaced
    status = {s["name"].split("] ", 1)[1].split()[0]: s["status"] for s in second["steps"]}  # by instruction
    assert status["COPY"] == "done", second["steps"]  # the project's files: the only step that ran
    assert status["RUN"] == "cached" and status["WORKDIR"] == "cached", second["steps"]
    old = docker_client.api.inspect_image(first["image_id"]) if _exists(docker_client, first["image_id"]) else None
    assert old is None  # the replaced image was removed, not left dangling
    new_layers = docker_client.api.inspect_image(second["image_id"])["RootFS"]["Layers"]
    stack_layers = docker_client.api.inspect_image(second["stack"]["image_id"])["RootFS"]["Layers"]
    assert new_layers[: len(stack_layers)] == stack_layers and len(new_layers) - len(stack_layers) <= 3
    print(f"rebuild after a code change: {seconds:.1f}s")
    assert seconds < 30


def _exists(client, image_id) -> bool:
    import docker

    try:
        client.images.get(image_id)
        return True
    except docker.errors.ImageNotFound:
        return False


def test_legacy_builder_builds_a_project_on_an_existing_stack(saxpy, docker_client, cli_env, tmp_path):
    project = tmp_path / "legacy"
    shutil.copytree(saxpy.dir, project, ignore=shutil.ignore_patterns(".cudabox"))
    (project / "cudabox.yaml").write_text((project / "cudabox.yaml").read_text().replace("name: saxpy",
                                                                                           "name: cb-test-legacy"))
    cudabox("lock", cwd=project, env=cli_env)
    result, log = build(project, cli_env, extra_env={"CUDABOX_BUILDER": "legacy"})
    assert result["builder"] == "the legacy builder (Docker API)" and result["stack"]["reused"] is True
    assert result["validation"]["status"] == "passed-without-gpu"
    assert any(s["name"].startswith("[") and "COPY" in s["name"] for s in result["steps"]), log


# --------------------------------------------------------------------------- (f) runtime flavour on a stand-in


STANDIN_NOTE = ("cudabox TEST STAND-IN, not NVIDIA's image: debian:bookworm-slim plus the CUDA runtime and NVRTC "
                "libraries of NVIDIA's pip wheels, laid out and configured as nvidia/cuda runtime images are")


@pytest.fixture(scope="session")
def runtime_standin(docker_client, cli_env, tmp_path_factory):
    """The nvidia/cuda runtime tag the resolver picks for a 12.8 runtime stack, as a local stand-in."""
    root = tmp_path_factory.mktemp("standin")
    project = root / "project"
    # The resolver picks nvidia/cuda:12.8.1-runtime-ubuntu24.04, whose python3 is Ubuntu's 3.12. The stand-in
    # is Debian-based, so this project's matrix overlay says what its python3 really is (Debian 12's 3.11).
    make_project(project, """name: cb-test-runtime
python: "3.11"
cuda: "12.8"
flavour: runtime
gpus: ["RTX 5090"]
ca_cert: host-ca.pem
""", cli_env, files={".cudabox/matrices/images.yaml": f"""# {STANDIN_NOTE}.
# Here nvidia/cuda:12.8.1-runtime-ubuntu24.04 is that stand-in (tests/test_build.py), built from Debian 12:
# its python3 is Debian's 3.11, not Ubuntu 24.04's 3.12.
os:
  - {{os: ubuntu24.04, python: "3.11", glibc: "2.36", source: [DEB-BOOKWORM-PY, DEB-BOOKWORM-LIBC], note: "test stand-in built from debian:bookworm-slim"}}
""", "main.py": "print('hello')\n",
                       "host-ca.pem": HOST_CA.read_text()})  # ca_cert: in cudabox.yaml, inside the project
    lock = json.loads((project / "cudabox.lock").read_text())["stack"]
    tag = lock["base_image"]
    assert tag == "nvidia/cuda:12.8.1-runtime-ubuntu24.04" and lock["python_install"] == "os", lock
    record = next(r for r in yaml.safe_load((REPO / "matrices" / "images.yaml").read_text())["nvidia_cuda"]
                  if r["cuda"] == tag.split(":")[1].split("-")[0])
    context = root / "standin"
    shutil.copytree(cuda_wheel_libs(lock["cuda"]) / "lib", context / "lib")
    (context / "Dockerfile").write_text(f"""# {STANDIN_NOTE}.
FROM debian:bookworm-slim
COPY lib/ /usr/local/cuda-{lock["cuda"]}/targets/x86_64-linux/lib/
RUN ln -s cuda-{lock["cuda"]} /usr/local/cuda \\
 && ln -s targets/x86_64-linux/lib /usr/local/cuda-{lock["cuda"]}/lib64 \\
 && echo /usr/local/cuda/targets/x86_64-linux/lib > /etc/ld.so.conf.d/988_cuda-12.conf \\
 && printf '/usr/local/nvidia/lib\\n/usr/local/nvidia/lib64\\n' > /etc/ld.so.conf.d/nvidia.conf \\
 && ldconfig
ENV NVARCH=x86_64 \\
    NVIDIA_REQUIRE_CUDA="{record["require"]}" \\
    CUDA_VERSION={record["cuda"]} \\
    PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \\
    NVIDIA_VISIBLE_DEVICES=all \\
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL io.cudabox.test.stand-in="{STANDIN_NOTE}"
""")
    docker_client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
    yield SimpleNamespace(dir=project, tag=tag)
    try:  # the fake nvidia/cuda tag goes; images built on it stay (cache)
        docker_client.images.remove(tag)
    except Exception:  # noqa: BLE001
        pass


def test_runtime_flavour_builds_and_validates_on_a_stand_in(runtime_standin, docker_client, cli_env):
    image = docker_client.images.get(runtime_standin.tag)
    assert "TEST STAND-IN" in image.labels["io.cudabox.test.stand-in"]
    result, _ = build(runtime_standin.dir, cli_env)  # the CA comes from ca_cert: in cudabox.yaml
    assert result["validation"]["status"] == "passed-without-gpu", result["validation"]
    checks = {c["name"]: c for c in result["validation"]["checks"]}
    assert "/usr/local/cuda" in checks["cudart"]["detail"]  # the base image's CUDA, not a wheel's
    assert "sm_120" in checks["nvrtc"]["detail"] and checks["nvrtc"]["status"] == "pass"
    env = dict(e.split("=", 1) for e in docker_client.api.inspect_image(result["image"])["Config"]["Env"])
    assert env["CUDA_VERSION"].startswith("12.8") and env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.8"


# --------------------------------------------------------------------------- --push


def test_push_tags_and_pushes_stack_and_project(saxpy, registry, cli_env):
    import urllib.request

    result, _ = build(saxpy.dir, cli_env, "--no-validate", "--push", registry.host, extra_env=CA)
    assert result["pushed"] == [f"{registry.host}/{result['stack']['image']}", f"{registry.host}/{result['image']}"]
    catalog = json.loads(urllib.request.urlopen(f"{registry.url}/v2/_catalog").read())
    assert sorted(catalog["repositories"]) == ["cudabox/saxpy", "cudabox/stack"]
    tags = json.loads(urllib.request.urlopen(f"{registry.url}/v2/cudabox/saxpy/tags/list").read())
    assert tags["tags"] == [result["image"].split(":")[1]]
