"""`cudabox ci`: matrix, bake file and workflow shapes (the workflow against SchemaStore's GitHub workflow
schema, vendored by check-jsonschema), drift detection, --filter, and `ci build` on the real engine."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest
import yaml

from cudabox.ci import workflow as ci
from cudabox.errors import InputError
from tests.docker_fixtures import HOST_CA, cli_env, cudabox, docker_client  # noqa: F401
from tests.support import REPO, run_cli

# The two smallest catalog images: plain CUDA stacks on the slim base's Python 3.11 (~400 MB each; the torch
# images are ~5 GB and stay out of CI).
SMALL = ("cuda/cuda-12.8-py3.11", "cuda/cuda-12.9-py3.11")


@pytest.fixture(scope="module")
def images():
    return ci.load_images(REPO / "images")


# --------------------------------------------------------------------------- matrix and filter


def test_matrix_has_one_entry_per_image(images):
    data = json.loads(run_cli("ci", "matrix", "--json", check=0).stdout)
    stacks = sorted(p.parent.relative_to(REPO / "images").as_posix() for p in (REPO / "images").glob("*/*/stack.json"))
    assert sorted(e["image"] for e in data["include"]) == stacks
    ids = [e["id"] for e in data["include"]]
    assert len(set(ids)) == len(ids) and all(set(i) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_") for i in ids)
    entry = next(e for e in data["include"] if e["image"] == SMALL[0])
    assert entry == {"id": "cuda-cuda-12-8-py3-11", "image": SMALL[0], "framework": "cuda", "version": "12.8",
                     "cuda": "12.8", "python": "3.11"}


@pytest.mark.parametrize("expr, expected", [
    ("cuda/cuda-12.[89]*", set(SMALL)),
    ("framework=cuda cuda>=12.8 cuda<13", set(SMALL)),
    ("cuda, python==3.11, version>=12.8, version<=12.9", set(SMALL)),
    ("cuda==12.8 framework!=torch framework!=jax framework!=tensorflow", {SMALL[0]}),
])
def test_filter_syntax(images, expr, expected):
    assert {i.path for i in ci.select(images, [expr])} == expected


def test_filter_or_and_errors(images):
    assert {i.path for i in ci.select(images, [SMALL[0], SMALL[1]])} == set(SMALL)
    assert all(i.framework == "torch" for i in ci.select(images, ["torch"]))
    assert all(i.stack.cuda.startswith("13.") for i in ci.select(images, ["cuda==13"]))
    with pytest.raises(InputError, match="unknown key"):
        ci.parse_filter("colour=red")
    with pytest.raises(InputError, match="not a version"):
        ci.parse_filter("cuda>=twelve")
    assert "no catalog image matches" in run_cli("ci", "build", "-f", "nothing-like-this", check=2).stderr


# --------------------------------------------------------------------------- bake

BAKE_TARGET_KEYS = {"context", "dockerfile", "target", "tags", "platforms", "labels", "contexts", "secret", "args",
                    "cache-from", "cache-to", "output", "pull", "no-cache"}


def test_bake_file_shape(images, tmp_path):
    out = tmp_path / "docker-bake.json"
    run_cli("ci", "bake", "-o", out, check=0)
    bake = json.loads(out.read_text())
    targets, groups = bake["target"], bake["group"]
    assert set(bake) == {"variable", "group", "target"} and "REGISTRY" in bake["variable"]
    image_targets = {t for t in targets if not t.startswith("stage-")}
    assert image_targets == {i.id for i in images} and set(groups["default"]["targets"]) == image_targets
    for name, target in targets.items():
        assert set(target) <= BAKE_TARGET_KEYS, name
        context = (out.parent / target["context"]).resolve()
        assert context == (REPO / "images").resolve()  # contexts are relative to the bake file
        dockerfile = context / target["dockerfile"]  # bake: relative to the context
        assert dockerfile.is_file(), name
        assert target["target"] in ci.stages(dockerfile.read_text()), name
    cuda = targets["cuda-cuda-12-8-py3-11"]
    assert cuda["tags"] == ["${REGISTRY}/cuda:cuda-12.8-py3.11"] and cuda["target"] == "stack"
    # shared stages: the uv stage, identical in every Dockerfile on the same base, is built once
    assert cuda["contexts"] == {"uv": cuda["contexts"]["uv"]} and cuda["contexts"]["uv"].startswith("target:stage-uv-")
    for name, target in targets.items():
        own = ci.stages((REPO / "images" / target["dockerfile"]).read_text())
        for stage, ref in target.get("contexts", {}).items():
            shared = targets[ref.removeprefix("target:")]
            theirs = ci.stages((REPO / "images" / shared["dockerfile"]).read_text())
            assert shared["target"] == stage and own[stage] == theirs[stage], (name, stage)
    users = {t["contexts"]["uv"] for t in targets.values() if "contexts" in t}
    assert 1 <= len(users) < len(image_targets)  # shared, not one per image


def test_bake_ca_secret_and_filter(tmp_path):
    bake = json.loads(run_cli("ci", "bake", "-f", "cuda/*", "--ca-cert", HOST_CA, check=0).stdout)
    assert all(t["secret"] == [f"id=ca_cert,src={HOST_CA}"] for t in bake["target"].values())
    assert set(bake["group"]) == {"default", "cuda"}


# --------------------------------------------------------------------------- workflow


def _github_workflow_schema() -> dict:
    from importlib import resources

    return json.loads(resources.files("check_jsonschema.builtin_schemas.vendor").joinpath(
        "github-workflows.json").read_text(encoding="utf-8"))


def test_workflow_validates_against_the_github_schema(images, tmp_path):
    import jsonschema

    path = tmp_path / "images.yml"
    run_cli("ci", "workflow", "--workflow", path, "--runner", "gpu-a100", check=0)
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True)  # YAML 1.1 reads the key `on` as true; GitHub (YAML 1.2) as "on"
    jsonschema.Draft7Validator(_github_workflow_schema()).validate(doc)
    assert set(doc["jobs"]) == {"generate-check", "matrix-check", "build"}
    build = doc["jobs"]["build"]
    assert build["runs-on"] == ["gpu-a100"] and set(build["needs"]) == {"generate-check", "matrix-check"}
    include = build["strategy"]["matrix"]["include"]
    assert include == json.loads(run_cli("ci", "matrix", "--json", check=0).stdout)["include"]
    steps = " ".join(s.get("run", "") for s in build["steps"])
    assert "cudabox ci build --filter" in steps and "--junit" in steps
    runs = " ".join(s.get("run", "") for j in ("generate-check", "matrix-check") for s in doc["jobs"][j]["steps"])
    assert "cudabox images check" in runs and "cudabox ci check" in runs


def test_committed_workflow_is_in_sync():
    assert (REPO / ci.WORKFLOW).is_file()
    assert "ok" in run_cli("ci", "check", check=0).stdout


def test_check_detects_drift_and_keeps_the_runner(tmp_path):
    path = tmp_path / "images.yml"
    assert "missing" in run_cli("ci", "check", "--workflow", path, check=1).stderr
    run_cli("ci", "workflow", "--workflow", path, "--runner", "my-gpus", check=0)
    run_cli("ci", "check", "--workflow", path, check=0)  # the runner label is read back from the file
    path.write_text(path.read_text().replace("cudabox ci build", "cudabox ci build --no-cache"))
    proc = run_cli("ci", "check", "--workflow", path, check=1)
    assert "cudabox ci workflow" in proc.stderr and "modified" in proc.stderr
    catalog = tmp_path / "catalog"
    shutil.copytree(REPO / "images" / "cuda", catalog / "cuda")
    proc = run_cli("ci", "check", "--workflow", REPO / ci.WORKFLOW, "--catalog", catalog, check=1)
    assert "modified" in proc.stderr  # fewer images than the workflow lists


# --------------------------------------------------------------------------- ci build on the real engine


@pytest.mark.docker
def test_ci_build_builds_two_small_images_and_writes_junit(tmp_path, docker_client, cli_env):  # noqa: F811
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    proc = cudabox("ci", "build", "--parallel", "2", "-f", SMALL[0], "-f", SMALL[1], "--ca-cert", HOST_CA,
                   "--junit", junit, "--summary", summary, cwd=tmp_path, env=cli_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuites" and suite.get("tests") == "2" and suite.get("failures") == "0"
    cases = {f"{c.get('classname')}/{c.get('name')}": c for c in suite.iter("testcase")}
    assert set(cases) == {"images.cuda/cuda-12.8-py3.11", "images.cuda/cuda-12.9-py3.11"}
    for case in cases.values():
        out = case.findtext("system-out")
        assert case.find("failure") is None and "status: passed" in out  # passed-without-gpu here
        assert "pass cudart" in out and "pass nvrtc" in out
    table = summary.read_text()
    assert "| image | size | build time | validation | GEMM TFLOPS |" in table
    assert f"| `{SMALL[0]}` |" in table and "passed-without-gpu | — |" in table  # no GPU: no TFLOPS
    for path in SMALL:
        framework, tag = path.split("/")
        image = docker_client.images.get(f"cudabox/{framework}:{tag}")
        stack = json.loads((REPO / "images" / path / "stack.json").read_text())
        assert image.labels["io.cudabox.stack.hash"] == stack["stack_hash"]


@pytest.mark.docker
def test_ci_build_reports_a_broken_image_as_a_failure(tmp_path, docker_client, cli_env):  # noqa: F811
    catalog = tmp_path / "images"
    shutil.copytree(REPO / "images" / "_support", catalog / "_support")
    shutil.copytree(REPO / "images" / SMALL[0], catalog / SMALL[0])
    dockerfile = catalog / SMALL[0] / "Dockerfile"
    text = dockerfile.read_text()
    dockerfile.write_text(text.replace("COPY _support/smoke.py", "RUN echo cb-test-broken && exit 7\n"
                                                                 "COPY _support/smoke.py", 1))
    junit = tmp_path / "junit.xml"
    proc = cudabox("ci", "build", "--catalog", catalog, "--ca-cert", HOST_CA, "--junit", junit,
                   "--registry", "cb-test-ci", cwd=tmp_path, env=cli_env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "1 of 1 image(s) failed" in proc.stderr
    failure = ET.parse(junit).getroot().find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "build"
    assert "exit code: 7" in failure.get("message") or "exit code 7" in failure.get("message")
    assert "cb-test-broken" in (failure.text or "") + failure.get("message")
