"""`cudabox export devcontainer` / `export compose` (issue 15): what they write validates against the
published schemas (tests/schemas/, vendored) and says what `cudabox run` does."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.support import REPO, run_cli

SCHEMAS = REPO / "tests" / "schemas"


def _validator(name: str, cls):
    """The draft each file declares ($schema); compose-spec's URL lacks the '#' jsonschema looks up."""
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    cls.check_schema(schema)
    return cls(schema)


DEVCONTAINER = _validator("devContainer.base.schema.json", jsonschema.Draft201909Validator)
COMPOSE = _validator("compose-spec.json", jsonschema.Draft7Validator)


def _errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('name: demo-proj\ncuda: "12.8"\n')
    run_cli("lock", cwd=tmp_path, check=0)
    return tmp_path


def test_devcontainer_validates_and_opens_the_image_with_gpus_uid_caches(project):
    run_cli("export", "devcontainer", cwd=project, check=0)
    doc = json.loads((project / ".devcontainer" / "devcontainer.json").read_text())
    assert _errors(DEVCONTAINER, doc) == []
    from cudabox.lock.lockfile import read_lock

    lock_part, folder_key = doc["image"][18:].split("-")  # cudabox/NAME:LOCKHASH-FOLDERKEY
    assert doc["image"].startswith("cudabox/demo-proj:") and read_lock(project).hash.startswith(lock_part)
    assert len(folder_key) == 8
    assert doc["workspaceFolder"] == "/workspace" and "target=/workspace" in doc["workspaceMount"]
    assert doc["hostRequirements"] == {"gpu": "optional"} and doc["updateRemoteUserUID"] is True
    assert {m["target"] for m in doc["mounts"]} == {"/cache/pip", "/cache/uv", "/cache/huggingface", "/cache/torch"}
    assert doc["containerEnv"]["HF_HOME"] == "/cache/huggingface" and "--ipc=host" in doc["runArgs"]
    assert "cudabox build" in doc["initializeCommand"]
    run_cli("export", "devcontainer", "--check", cwd=project, check=0)
    # the schema catches what the tools would refuse (so the check above can fail)
    assert _errors(DEVCONTAINER, dict(doc, hostRequirements={"gpu": "sometimes"}))
    assert _errors(DEVCONTAINER, dict(doc, mounts=[{"source": "/x"}]))


def test_devcontainer_options_and_staleness(project):
    run_cli("export", "devcontainer", "--gpu", "required", "--no-build", cwd=project, check=0)
    doc = json.loads((project / ".devcontainer" / "devcontainer.json").read_text())
    assert _errors(DEVCONTAINER, doc) == [] and doc["hostRequirements"] == {"gpu": True}
    assert "cudabox build" not in doc["initializeCommand"]
    run_cli("export", "devcontainer", "--gpu", "none", cwd=project, check=0)
    doc = json.loads((project / ".devcontainer" / "devcontainer.json").read_text())
    assert "hostRequirements" not in doc and "--check --gpu none" in doc["initializeCommand"]
    run_cli("export", "devcontainer", "--gpu", "none", "--check", cwd=project, check=0)
    (project / "cudabox.yaml").write_text('name: demo-proj\ncuda: "12.6"\n')
    run_cli("lock", cwd=project, check=0)
    stale = run_cli("export", "devcontainer", "--gpu", "none", "--check", cwd=project, check=1)
    assert "run `cudabox export devcontainer`" in stale.stderr
    bad = run_cli("export", "devcontainer", "--gpu", "sometimes", cwd=project, check=2)
    assert "--gpu sometimes" in bad.stderr


def test_compose_validates_with_gpu_reservation_ipc_mounts(project):
    run_cli("export", "compose", "-p", "8888", "--", "jupyter", "lab", "--ip", "0.0.0.0", cwd=project, check=0)
    doc = yaml.safe_load((project / "compose.yaml").read_text())
    assert _errors(COMPOSE, doc) == []
    service = doc["services"]["demo-proj"]
    assert service["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "capabilities": ["gpu"], "count": "all"}]
    assert service["ipc"] == "host" and service["init"] is True
    assert service["volumes"][0] == {"type": "bind", "source": ".", "target": "/workspace"}
    assert {v["target"] for v in service["volumes"][1:]} == {"/cache/pip", "/cache/uv", "/cache/huggingface",
                                                             "/cache/torch"}
    assert all(Path(v["source"]).is_dir() for v in service["volumes"][1:])  # made as the user, not by the engine
    assert service["ports"] == ["127.0.0.1:8888:8888"]
    assert service["command"] == ["jupyter", "lab", "--ip", "0.0.0.0"]
    import os

    assert service["user"] == f"{os.getuid()}:{os.getgid()}"
    assert _errors(COMPOSE, {"services": {"x": dict(service, ipc=7)}})  # the schema does refuse


def test_compose_options(project, tmp_path_factory):
    out = tmp_path_factory.mktemp("elsewhere") / "deploy" / "compose.yaml"
    run_cli("export", "compose", "--gpus", "0,2", "--shm-size", "16g", "-u", "1234:1234", "-o", out,
            cwd=project, check=0)
    doc = yaml.safe_load(out.read_text())
    assert _errors(COMPOSE, doc) == []
    service = doc["services"]["demo-proj"]
    assert service["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["0", "2"]
    assert service["shm_size"] == "16g" and "ipc" not in service and service["user"] == "1234:1234"
    assert (out.parent / service["volumes"][0]["source"]).resolve() == project.resolve()
    none = yaml.safe_load(run_cli("export", "compose", "--gpus", "none", "-o", "-", cwd=project, check=0).stdout)
    assert "deploy" not in none["services"]["demo-proj"] and _errors(COMPOSE, none) == []
    assert "--gpus lots" in run_cli("export", "compose", "--gpus", "lots", cwd=project, check=2).stderr
    assert "-p 99999" in run_cli("export", "compose", "-p", "99999", cwd=project, check=2).stderr


def test_compose_project_name_is_one_compose_accepts(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('name: demo.proj_2\ncuda: "12.8"\n')
    run_cli("lock", cwd=tmp_path, check=0)
    doc = yaml.safe_load(run_cli("export", "compose", "-o", "-", cwd=tmp_path, check=0).stdout)
    assert doc["name"] == "demo-proj_2" and list(doc["services"]) == ["demo-proj_2"]
    assert _errors(COMPOSE, doc) == []
