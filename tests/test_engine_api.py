"""Jobs' engine requests (cudabox/engine/api.py): each body is what the docker SDK sends for the same container
(compared key for key, no engine needed), and both transports, the engine's Unix socket and the SDK's session
(tcp://, ssh:// hosts), run a job on the real engine the same way."""

from __future__ import annotations

import json
import os

import pytest

from cudabox.engine import JOB_LABEL, STDERR, STDOUT, ContainerSpec, EngineError, GpuAccess
from cudabox.engine.api import client_config, container_body, device_requests, parse_bytes, proxy_env
from tests.docker_fixtures import BASE_IMAGE, docker_client  # noqa: F401

SPECS = [
    ContainerSpec(image="sha256:abc", command=["python", "x.py"], user="1000:1000",
                  env={"HOME": "/home/cudabox", "A": "b=c", "EMPTY": ""}, workdir="/workspace",
                  labels={JOB_LABEL: "1", "io.cudabox.project": "demo"}, binds=["/p:/workspace:rw", "vol:/data:ro"],
                  ulimits=(("memlock", -1, -1), ("stack", 67108864, 67108864)),
                  tmpfs={"/home/cudabox": "exec,mode=0755,uid=1000,gid=1000"}, ipc="host"),
    ContainerSpec(image="img", name="job", tty=True, stdin=True, gpus=("all",), shm_size="16g", ipc=None,
                  ports={"8888/tcp": ("127.0.0.1", 8888), "53/udp": [("0.0.0.0", 53), ("127.0.0.1",)],
                         "9000/tcp": 9001}),
    ContainerSpec(image="img", command=["true"], gpus=("0", "GPU-1a2b"), stdin=True, shm_size="512m", init=False),
    ContainerSpec(image="img", labels={}),
]


def _sdk_body(api, spec: ContainerSpec, gpus) -> dict:
    """What cudabox's create() sent through the SDK before api.py (the same arguments, the SDK's body)."""
    from docker.types import Ulimit

    sent = {}
    api.create_container_from_config = lambda config, name=None, platform=None: sent.update(config=config)
    host = api.create_host_config(
        binds=list(spec.binds), port_bindings=dict(spec.ports) or None, init=spec.init,
        device_requests=device_requests(spec.gpus, gpus) or None, ipc_mode=spec.ipc, shm_size=spec.shm_size,
        ulimits=[Ulimit(name=n, soft=s, hard=h) for n, s, h in spec.ulimits], tmpfs=dict(spec.tmpfs) or None)
    ports = [(int(k.split("/")[0]), k.split("/")[1]) for k in spec.ports]
    api.create_container(spec.image, command=spec.command or None, user=spec.user, environment=spec.env,
                         working_dir=spec.workdir, labels=spec.labels, name=spec.name, tty=spec.tty,
                         stdin_open=spec.stdin, ports=ports or None, host_config=host)
    return json.loads(json.dumps({k: v for k, v in sent["config"].items() if v is not None}))  # _post_json's


@pytest.mark.parametrize("config", [None, {"proxies": {"default": {"httpProxy": "http://proxy:3128",
                                                                    "noProxy": "localhost,.corp"}}}])
def test_create_bodies_are_the_sdks(tmp_path, monkeypatch, config):
    import docker

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    if config:
        (tmp_path / "config.json").write_text(json.dumps(config))
    api = docker.APIClient(version="1.41")  # reads the client config; connects to nothing
    proxies = proxy_env(client_config(), "http+docker://localhost")
    assert bool(proxies) == bool(config)
    for spec in SPECS:
        for access in (None, GpuAccess("gpus", "toolkit"), GpuAccess("cdi", "CDI")):
            ours = json.loads(json.dumps(container_body(spec, access, proxies)))
            assert ours == _sdk_body(api, spec, access), (spec, access)


def test_sizes_read_as_the_sdk_reads_them():
    from docker.utils import parse_bytes as sdk_parse

    for text in ("16g", "512m", "1024", "1k", "2GB", "1.5g", "64Mb", "0"):
        assert parse_bytes(text) == sdk_parse(text), text
    with pytest.raises(EngineError, match="not a size"):
        parse_bytes("lots")


def test_gpu_requests_take_the_engines_form():
    assert device_requests(()) == []
    assert device_requests(("all",))[0]["Count"] == -1
    cdi = device_requests(("0", "2"), GpuAccess("cdi", "CDI"))[0]
    assert cdi["Driver"] == "cdi" and cdi["DeviceIDs"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=2"]


def _engine(transport: str):
    from cudabox.engine.api import UnixAPI
    from cudabox.engine.docker import DockerEngine, SdkAPI

    if transport == "unix":
        api = UnixAPI((os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock")[len("unix://"):], 60)
        api.ping()
    else:
        import docker

        api = SdkAPI(docker.from_env(timeout=60))
    return DockerEngine(api)


@pytest.mark.docker
@pytest.mark.parametrize("transport", ["unix", "sdk"])
@pytest.mark.parametrize("tty", [False, True])
def test_a_job_runs_the_same_through_both_transports(docker_client, transport, tty):  # noqa: F811
    engine = _engine(transport)
    assert engine.image(BASE_IMAGE)["Id"].startswith("sha256:")
    assert engine.image("cudabox/no-such-image:x") is None and engine.image("Not A Reference!") is None
    script = "read line; echo out $line; echo err >&2; exit 7"
    spec = ContainerSpec(image=BASE_IMAGE, command=["sh", "-c", script], stdin=True, tty=tty, env={"X": "y"},
                         labels={JOB_LABEL: "1", "cb-test-transport": transport}, ulimits=(("stack", 8388608, 8388608),))
    cid = engine.create(spec)
    try:
        stream = engine.attach(cid, stdin=True, tty=tty)
        engine.start(cid)
        stream.send(b"in\n")
        if not tty:
            stream.close_input()
        frames = list(stream.frames())
        assert engine.wait(cid) == 7
        out = b"".join(d for s, d in frames if s == STDOUT).replace(b"\r\n", b"\n")
        err = b"".join(d for s, d in frames if s == STDERR)
        assert (out, err) == ((b"in\nout in\nerr\n", b"") if tty else (b"out in\n", b"err\n"))
        info = engine.inspect(cid)
        assert info.labels["cb-test-transport"] == transport and info.tty == tty and not info.running
        assert cid in [c.id for c in engine.containers(JOB_LABEL, all_=True)]
        assert cid not in [c.id for c in engine.containers(JOB_LABEL)]  # ended: only with all_
    finally:
        engine.remove(cid)
    assert engine.inspect(cid) is None
    engine.remove(cid)  # already gone: not an error
    with pytest.raises(EngineError):
        engine.start(cid)
