"""Issue #19: the catalog's PaddlePaddle stack, built and validated by `cudabox ci build` on the real engine.

No registry is reachable here, so the nvidia/cuda base the stack resolves to is a local stand-in (Debian plus
the CUDA 11.8 runtime, cuBLAS and cuDNN 8.9.6 libraries of NVIDIA's pip wheels, laid out as nvidia/cuda
images are), like tests/test_build.py's runtime stand-in. Its python3 is Debian's 3.11, not Ubuntu 22.04's
3.10, so the test renders the catalog entry again from the bundled matrix plus a one-line overlay that says
so (images/paddle/... itself is the catalog's, kept in sync by `cudabox images check`). Everything else is
the real thing: the paddlepaddle-gpu wheel from PyPI (~760 MB, ~20 s to download here), the generated
Dockerfile, `ci build` and the smoke test's framework.paddle check inside the image.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
import yaml

from cudabox.image import catalog
from cudabox.knowledge import loader
from tests.docker_fixtures import HOST_CA, cli_env, cuda_wheel_libs, cudabox, docker_client  # noqa: F401
from tests.support import REPO

STANDIN_NOTE = ("cudabox TEST STAND-IN, not NVIDIA's image: debian:bookworm-slim plus the CUDA 11.8 runtime, "
                "cuBLAS and cuDNN 8.9.6 libraries of NVIDIA's pip wheels, laid out as nvidia/cuda cudnn images are")
CU11_LIBS = ["nvidia-cuda-runtime-cu11==11.8.89", "nvidia-cuda-nvrtc-cu11==11.8.89",
             "nvidia-cublas-cu11==11.11.3.6", "nvidia-cudnn-cu11==8.9.6.50"]


@pytest.fixture(scope="module")
def paddle_catalog(tmp_path_factory, docker_client):  # noqa: F811
    root = tmp_path_factory.mktemp("paddle-catalog")
    overlay = root / "project" / ".cudabox" / "matrices"
    overlay.mkdir(parents=True)
    (overlay / "images.yaml").write_text(
        f"# {STANDIN_NOTE}: its python3 is Debian 12's 3.11\n"
        "os:\n  - {os: ubuntu22.04, python: \"3.11\", source: DEB-BOOKWORM-PY, note: \"test stand-in\"}\n")
    m = loader.load(root / "project")
    entry = next(e for e in catalog.load_catalog(frameworks=m.frameworks) if e.framework == "paddle")
    result = catalog.plan(matrix=m, entries=[replace(entry, python="3.11")])
    assert not result.failures, result.failures
    images = root / "images"
    catalog.generate(images, result)
    (image,) = result.images
    stack = image.stack
    assert stack.base_image == "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04"  # end-of-life: the entry allows it
    assert stack.requirements == ("paddlepaddle-gpu==2.6.2",) and stack.os_packages == ("libgomp1",)

    context = root / "standin"
    shutil.copytree(cuda_wheel_libs("11.8", CU11_LIBS, key="paddle-cu118") / "lib", context / "lib")
    record = next(r for r in yaml.safe_load((REPO / "matrices" / "images.yaml").read_text())["nvidia_cuda"]
                  if r["cuda"] == "11.8.0")
    (context / "Dockerfile").write_text(f"""# {STANDIN_NOTE}.
FROM debian:bookworm-slim
COPY lib/ /usr/local/cuda-11.8/targets/x86_64-linux/lib/
RUN cd /usr/local/cuda-11.8/targets/x86_64-linux/lib \\
 && mv libcudart.so.11.0 libcudart.so.11.8.89 && ln -s libcudart.so.11.8.89 libcudart.so.11.0 \\
 && ln -s cuda-11.8 /usr/local/cuda \\
 && ln -s targets/x86_64-linux/lib /usr/local/cuda-11.8/lib64 \\
 && echo /usr/local/cuda/targets/x86_64-linux/lib > /etc/ld.so.conf.d/988_cuda-11.conf \\
 && ldconfig
ENV NVARCH=x86_64 \\
    NVIDIA_REQUIRE_CUDA="{record["require"]}" \\
    NV_CUDNN_VERSION={record["cudnn"]} \\
    CUDA_VERSION={record["cuda"]} \\
    PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \\
    NVIDIA_VISIBLE_DEVICES=all \\
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL io.cudabox.test.stand-in="{STANDIN_NOTE}"
""")
    docker_client.images.build(path=str(context), tag=stack.base_image, rm=True, forcerm=True)
    yield images, image
    try:  # the fake nvidia/cuda tag goes; the image built on it stays (cache)
        docker_client.images.remove(stack.base_image)
    except Exception:  # noqa: BLE001
        pass


@pytest.mark.docker
@pytest.mark.network
def test_ci_build_builds_and_validates_the_paddle_stack(paddle_catalog, tmp_path, docker_client, cli_env):  # noqa: F811
    images, image = paddle_catalog
    junit = tmp_path / "junit.xml"
    proc = cudabox("ci", "build", "--catalog", images, "-f", "paddle", "--ca-cert", HOST_CA, "--junit", junit,
                   cwd=tmp_path, env=cli_env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (case,) = list(ET.parse(junit).getroot().iter("testcase"))
    out = case.findtext("system-out")
    assert case.find("failure") is None and "status: passed" in out  # passed-without-gpu: no GPU here
    # the smoke test imported paddle and read its build: PyPI's 2.6.2 is the CUDA 11.8 / cuDNN 8.6.0 build
    assert "pass framework.paddle" in out and "paddle 2.6.2" in out and "CUDA 11.8" in out and "cuDNN 8.6.0" in out
    assert "0 GPU(s) visible" in out
    assert "pass cudnn" in out and "pass packages" in out
    # a CUDA 11 runtime tells its version only to a driver: here it comes from the file name, as NVIDIA names it
    assert "pass cudart" in out and "from the file name" in out
    built = docker_client.images.get(f"cudabox/paddle:{image.tag}")
    assert built.labels["io.cudabox.stack.hash"] == image.stack.hash
    expect = json.loads((images / image.path / "expect.json").read_text())
    assert expect["frameworks"] == ["paddle"] and expect["packages"] == {"paddlepaddle-gpu": "2.6.2"}


def test_committed_paddle_image_is_the_catalog_entry():
    stack = json.loads(next((REPO / "images" / "paddle").glob("2.6.2-cu118-*/stack.json")).read_text())
    assert stack["base_image"] == "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04"
    assert stack["requirements"] == ["paddlepaddle-gpu==2.6.2"] and stack["os_packages"] == ["libgomp1"]
    assert stack["python"] == "3.10" and stack["python_install"] == "os"  # Ubuntu 22.04's own python3
