"""Pure logic of the build path, no Docker engine: progress parsing (from logs recorded on Docker
20.10), builder detection (with stand-in `docker` executables), the project Dockerfile, reuse
fingerprints, CA resolution and report parsing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cudabox.image import build
from cudabox.engine import docker as engine
from cudabox.engine.buildlog import CACHED, DONE, ERROR, LOG, OUTPUT, STEP, BuildLog, PlainParser, StreamParser, short
from cudabox.errors import EnvironmentProblem, InputError
from tests.support import REPO

# `DOCKER_BUILDKIT=1 docker build --progress=plain` (Docker 20.10) of a two-stage Dockerfile whose last RUN
# fails; the lines that only carry a vertex digest are kept, as the CLI prints them.
FAILED_PLAIN = """\
#1 [internal] load build definition from Dockerfile
#1 sha256:51847c2f5e2cfd3f29db5dd44ea0ea3b78168fb0d437916715d02bccbe96aec4
#1 transferring dockerfile: 187B done
#1 DONE 0.0s

#4 [base 1/2] FROM docker.io/library/debian:bookworm-slim
#4 sha256:56bf5dcd38ee2f60f646b15b1b91e40b5e8375a457572f890edbccbd17190813
#4 CACHED

#5 [base 2/2] RUN echo step-one
#5 sha256:3cd548201dd7c1dba57ddbd53f44e992c38e951886b96184d964927ad4ec8a2e
#5 0.186 step-one
#5 DONE 0.2s

#7 [final 1/2] COPY hello.txt /hello.txt
#7 sha256:f5e543cd76b549aa4f2eaa6264479c4a4ddced05461e34c2184720711a3ec1db
#7 DONE 0.1s

#8 [final 2/2] RUN echo about-to-fail; echo to-stderr >&2; exit 3
#8 sha256:38bb2f5aa3a057c464393e86a799298fbd44fc851b210674f9275cd2ce543997
#8 0.198 about-to-fail
#8 0.198 to-stderr
#8 ERROR: executor failed running [/bin/sh -c echo about-to-fail; echo to-stderr >&2; exit 3]: exit code: 3
------
 > [final 2/2] RUN echo about-to-fail; echo to-stderr >&2; exit 3:
------
executor failed running [/bin/sh -c echo about-to-fail; echo to-stderr >&2; exit 3]: exit code: 3
"""

MISSING_BASE = """\
#3 [internal] load metadata for docker.io/nvidia/cuda:99.0-runtime-ubuntu24.04
#3 sha256:7f424bedb9dde81e8871e59a310cceab7ab3a95144f8ec8cd8630038d8a9f679
#3 ERROR: failed to do request: Head "https://registry-1.docker.io/v2/nvidia/cuda/manifests/99.0": no such host
------
 > [internal] load metadata for docker.io/nvidia/cuda:99.0-runtime-ubuntu24.04:
------
failed to solve with frontend dockerfile.v0: failed to create LLB definition: failed to do request
"""

# The docker SDK's stream from the legacy builder for the same Dockerfile (chunks as received).
FAILED_STREAM = [
    {"stream": "Step 1/5 : FROM debian:bookworm-slim AS base"}, {"stream": "\n"}, {"stream": " ---> ad82edd66d7a\n"},
    {"stream": "Step 2/5 : RUN echo step-one"}, {"stream": "\n"}, {"stream": " ---> Using cache\n"},
    {"stream": " ---> c71b5ffa1533\n"}, {"aux": {"ID": "sha256:c71b5ffa1533"}},
    {"stream": "Step 3/5 : FROM base AS final"}, {"stream": "\n"}, {"stream": " ---> c71b5ffa1533\n"},
    {"stream": "Step 4/5 : COPY hello.txt /hello.txt"}, {"stream": "\n"}, {"stream": " ---> ebd0c8243f69\n"},
    {"stream": "Step 5/5 : RUN echo about-to-fail; echo to-stderr >&2; exit 3"}, {"stream": "\n"},
    {"stream": " ---> Running in 089ccb3be1e7\n"}, {"stream": "about-"}, {"stream": "to-fail\n"},
    {"stream": "\u001b[91mto-stderr\n\u001b[0m"}, {"stream": "Removing intermediate container 089ccb3be1e7\n"},
    {"errorDetail": {"code": 3, "message": "The command '/bin/sh -c echo about-to-fail; echo to-stderr >&2; exit 3' "
                                          "returned a non-zero code: 3"},
     "error": "The command '/bin/sh -c echo about-to-fail; echo to-stderr >&2; exit 3' returned a non-zero code: 3"},
]


def _plain_events(text):
    parser = PlainParser()
    return [e for line in text.splitlines(keepends=True) for e in parser.feed(line)]


def test_plain_progress_becomes_events():
    events = _plain_events(FAILED_PLAIN)
    steps = [e.name for e in events if e.kind == STEP]
    assert steps == ["[internal] load build definition from Dockerfile",
                     "[base 1/2] FROM docker.io/library/debian:bookworm-slim",
                     "[base 2/2] RUN echo step-one", "[final 1/2] COPY hello.txt /hello.txt",
                     "[final 2/2] RUN echo about-to-fail; echo to-stderr >&2; exit 3"]
    assert [(e.step, e.kind) for e in events if e.kind in (CACHED, DONE, ERROR)] == [
        ("#1", DONE), ("#4", CACHED), ("#5", DONE), ("#7", DONE), ("#8", ERROR)]
    assert [e.text for e in events if e.kind == OUTPUT] == ["step-one", "about-to-fail", "to-stderr"]
    assert not any("sha256:" in e.text for e in events if e.kind != LOG or e.step)  # digests are dropped


def test_build_log_summary_and_failure_line():
    log = BuildLog()
    for event in _plain_events(FAILED_PLAIN):
        log.add(event)
    assert [(s["name"].split("]")[0] + "]", s["status"]) for s in log.summary()] == [
        ("[base 1/2]", "cached"), ("[base 2/2]", "done"), ("[final 1/2]", "done"), ("[final 2/2]", "error")]
    line, tail = log.failure()
    assert line == "build failed at [final 2/2] RUN echo about-to-fail; echo to-stderr >&2; exit 3 (exit code 3)"
    assert tail == ["about-to-fail", "to-stderr"]


def test_failure_outside_a_dockerfile_step_names_the_builder_error():
    log = BuildLog()
    for event in _plain_events(MISSING_BASE):
        log.add(event)
    line, _ = log.failure()
    assert line.startswith("build failed at [internal] load metadata for docker.io/nvidia/cuda:99.0")
    assert "no such host" in line


def test_legacy_stream_becomes_the_same_events():
    ticks = iter(range(100))
    parser = StreamParser(clock=lambda: float(next(ticks)))
    log = BuildLog()
    for chunk in FAILED_STREAM:
        for event in parser.feed(chunk):
            log.add(event)
    for event in parser.close():
        log.add(event)
    assert [(s["name"], s["status"]) for s in log.summary()] == [
        ("[1/5] FROM debian:bookworm-slim AS base", "done"), ("[2/5] RUN echo step-one", "cached"),
        ("[3/5] FROM base AS final", "done"), ("[4/5] COPY hello.txt /hello.txt", "done"),
        ("[5/5] RUN echo about-to-fail; echo to-stderr >&2; exit 3", "error")]
    assert parser.failed and parser.image_id == "sha256:c71b5ffa1533"  # an intermediate stage's: not a success
    line, tail = log.failure()
    assert line == "build failed at [5/5] RUN echo about-to-fail; echo to-stderr >&2; exit 3 (exit code 3)"
    assert tail == ["about-to-fail", "to-stderr"]  # split chunks joined, colour codes gone


def test_short_names_show_a_run_steps_own_command():
    with_secrets = ('[project 5/5] RUN --mount=type=cache,target=/root/.cache/uv,sharing=locked     '
                    '--mount=type=secret,id=ca_cert     ["/bin/sh", "-c", "if [ -s /run/secrets/ca_cert ]; then export '
                    'X=1; fi; eval "$1"", "sh", "make -j4 && echo done"]')
    assert short(with_secrets) == "[project 5/5] RUN make -j4 && echo done"
    assert short('[4/5] RUN ["/bin/sh","-c","exit 3"]') == "[4/5] RUN exit 3"
    assert short("[stack 2/8] RUN " + "x" * 300, 40).endswith("…") and len(short("x" * 300, 40)) == 40


# --------------------------------------------------------------------------- builder detection


def _fake_docker(directory: Path, version: str, buildx: bool, driver: str = "docker") -> str:
    """An executable that answers `docker --version` / `buildx version` / `buildx inspect` like a real CLI."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "docker"
    bx = (f'if [ "$1 $2" = "buildx version" ]; then echo "github.com/docker/buildx v0.17.1"; exit 0; fi\n'
          f'if [ "$1 $2" = "buildx inspect" ]; then printf "Name: default\\nDriver: {driver}\\n"; exit 0; fi\n'
          if buildx else 'if [ "$1" = buildx ]; then echo "docker: unknown command: docker buildx" >&2; exit 1; fi\n')
    path.write_text(f'#!/bin/sh\n{bx}if [ "$1" = --version ]; then echo "Docker version {version}, build x"; fi\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_probe_tells_buildx_buildkit_and_neither_apart(tmp_path):
    kind, why, local = engine.probe_cli(_fake_docker(tmp_path / "a", "28.2.2", buildx=True))
    assert (kind, local) == (engine.BUILDX, True) and "buildx" in why
    assert engine.probe_cli(_fake_docker(tmp_path / "b", "28.2.2", True, "docker-container"))[2] is False
    kind, why, _ = engine.probe_cli(_fake_docker(tmp_path / "c", "20.10.24+dfsg1", buildx=False))
    assert kind == engine.BUILDKIT and "20.10.24+dfsg1" in why
    kind, why, _ = engine.probe_cli(_fake_docker(tmp_path / "d", "28.2.2", buildx=False))
    assert kind is None and "without buildx" in why


def test_first_docker_on_path_that_can_buildkit_wins(tmp_path):
    new = _fake_docker(tmp_path / "usr-local-bin", "28.2.2", buildx=False)  # first on PATH, like here
    old = _fake_docker(tmp_path / "usr-bin", "20.10.24", buildx=False)
    path = os.pathsep.join([str(tmp_path / "usr-local-bin"), str(tmp_path / "usr-bin")])
    assert engine.docker_candidates(path) == [new, old]
    chosen = engine.choose_builder(env={}, candidates=engine.docker_candidates(path))
    assert (chosen.kind, chosen.docker) == (engine.BUILDKIT, old)
    assert "DOCKER_BUILDKIT=1" in chosen.describe()


def test_configured_docker_is_the_only_one_tried(tmp_path):
    new = _fake_docker(tmp_path / "new", "28.2.2", buildx=False)
    old = _fake_docker(tmp_path / "old", "20.10.24", buildx=False)
    fallback = engine.choose_builder(new, env={}, candidates=[old])
    assert fallback.kind == engine.LEGACY and "without buildx" in fallback.why
    assert engine.choose_builder(env={"CUDABOX_DOCKER": old}).docker == old
    with pytest.raises(InputError, match="--docker /nonexistent/docker: no such executable"):
        engine.choose_builder("/nonexistent/docker", env={})


def test_no_cli_means_the_legacy_builder_and_the_kind_can_be_forced(tmp_path):
    old = _fake_docker(tmp_path / "old", "20.10.24", buildx=False)
    assert engine.choose_builder(env={}, candidates=[]).kind == engine.LEGACY
    assert engine.choose_builder(env={"CUDABOX_BUILDER": "legacy"}, candidates=[old]).kind == engine.LEGACY
    with pytest.raises(EnvironmentProblem, match="CUDABOX_BUILDER=buildx"):
        engine.choose_builder(env={"CUDABOX_BUILDER": "buildx"}, candidates=[old])
    with pytest.raises(InputError):
        engine.choose_builder(env={"CUDABOX_BUILDER": "kaniko"}, candidates=[old])


# --------------------------------------------------------------------------- the build context


@pytest.mark.parametrize("snapshot", ["slim-torch", "legacy-slim-torch", "devel-torch"])  # project renders
def test_project_dockerfile_starts_from_the_stack_image(snapshot):
    text = (REPO / "tests" / "snapshots" / f"{snapshot}.Dockerfile").read_text()
    out = build.project_dockerfile(text, "cudabox/stack:0123456789abcdef")
    froms = [line for line in out.splitlines() if line.startswith("FROM ")]
    assert "FROM cudabox/stack:0123456789abcdef AS project" in froms[0] + froms[-1] or \
        "FROM cudabox/stack:0123456789abcdef AS project-build" in froms
    assert not any(" AS stack" in line for line in froms)
    assert any(" AS uv" in line for line in froms) == ("--from=uv" in out)  # uv only when a kept stage needs it
    assert "\n# ---- stack" not in out and "\n# ---- project" in out  # stage comments move with their stage
    assert out.startswith("# Generated by `cudabox build`")


def test_repo_names_are_valid_docker_paths():
    assert build.repo_name("saxpy") == "saxpy"
    assert build.repo_name("my_proj.v2") == "my_proj.v2"
    assert build.repo_name("a-") == "a" and build.repo_name("a..b") == "a-b" and build.repo_name("x__y") == "x__y"


def test_fingerprint_follows_the_files_the_build_reads(tmp_path):
    (tmp_path / "main.py").write_text("print(1)\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")
    ignore = [".git", "**/__pycache__"]
    first = build.context_fingerprint(tmp_path, ignore, "Dockerfile", "stack-a")
    assert build.context_fingerprint(tmp_path, ignore, "Dockerfile", "stack-a") == first
    (tmp_path / ".git" / "HEAD").write_text("other ref\n")  # ignored: no rebuild
    assert build.context_fingerprint(tmp_path, ignore, "Dockerfile", "stack-a") == first
    assert build.context_fingerprint(tmp_path, ignore, "Dockerfile", "stack-b") != first  # a new stack image: rebuild
    (tmp_path / "main.py").write_text("print(2)  # changed\n")
    assert build.context_fingerprint(tmp_path, ignore, "Dockerfile", "stack-a") != first


def test_ca_certificate_precedence_and_checks(tmp_path, monkeypatch):
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    project = tmp_path / "p"
    project.mkdir()
    (project / "cudabox.yaml").write_text("name: p\nca_cert: certs/corp.pem\n")
    (project / "certs").mkdir()
    (project / "certs" / "corp.pem").write_text(pem)
    (tmp_path / "env.pem").write_text(pem)
    (tmp_path / "flag.pem").write_text(pem)
    monkeypatch.delenv("CUDABOX_CA_CERT", raising=False)
    assert build.resolve_ca_cert(project)[0] == (project / "certs" / "corp.pem").resolve()
    monkeypatch.setenv("CUDABOX_CA_CERT", str(tmp_path / "env.pem"))
    assert build.resolve_ca_cert(project) == ((tmp_path / "env.pem").resolve(), "CUDABOX_CA_CERT")
    assert build.resolve_ca_cert(project, tmp_path / "flag.pem")[1] == "--ca-cert"
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    with pytest.raises(InputError, match="--ca-cert: .*not a PEM certificate bundle"):
        build.resolve_ca_cert(project, tmp_path / "bad.pem")
    with pytest.raises(InputError, match="cannot read"):
        build.resolve_ca_cert(project, tmp_path / "missing.pem")


# --------------------------------------------------------------------------- reports


def test_report_from_smoke_output():
    from cudabox.image import validate
    from cudabox.engine import GpuAccess

    smoke = ('{"schema": "cudabox.smoke/v1", "status": "passed-without-gpu", "python": "3.11.2", '
             '"targets": ["sm_120"], '
             '"checks": [{"name": "nvrtc", "status": "pass", "detail": "ok", "ms": 1.0}, '
             '{"name": "gpu", "status": "skip", "detail": "skipped: --no-gpu given", "ms": 0}], "perf": {}}')
    none = GpuAccess(None, reason="the Docker engine has no NVIDIA runtime")
    report = validate._report("img", "sha256:ab", (), none, 4, smoke, "")
    assert (report.status, report.exit_code, report.gpu) == ("passed-without-gpu", 4, False)
    assert report.gpu_reason == "the Docker engine has no NVIDIA runtime"
    assert report.checks[-1].detail == "no GPU in the container: the Docker engine has no NVIDIA runtime"
    again = validate.Report.from_dict(report.to_dict())
    assert again.to_dict() == report.to_dict()
    broken = validate._report("img", "sha256:ab", (), none, 127, "", "exec: python: not found\n")
    assert broken.status == "failed" and "python: not found" in broken.checks[0].detail
    usage = validate._report("img", "sha256:ab", (), none, 2, '{"schema": "cudabox.smoke/v1", "status": "error", '
                                                             '"error": "expect.json: bad"}', "")
    assert usage.status == "failed" and usage.exit_code == 1 and "expect.json: bad" in usage.checks[-1].detail


def test_reports_are_stored_by_image_id_and_extra_targets():
    from cudabox.image import validate

    assert validate.report_path("sha256:abc").name == "abc.json"
    assert validate.report_path("sha256:abc", ("sm_120", "sm_90")).name == "abc+sm_120+sm_90.json"


# --------------------------------------------------------------------------- the CLI before any engine


def test_build_refuses_a_stale_lock(tmp_path, cli):
    (tmp_path / "cudabox.yaml").write_text('name: stale\npython: "3.11"\ncuda: "12.8"\n')
    cli("lock", cwd=tmp_path, check=0)
    (tmp_path / "cudabox.yaml").write_text('name: stale\npython: "3.11"\ncuda: "12.4"\n')
    proc = cli("build", cwd=tmp_path, check=1)
    assert "changed since cudabox.lock was written; run `cudabox lock`" in proc.stderr


def test_unreachable_engine_is_exit_5_with_a_fix(tmp_path, cli):
    (tmp_path / "cudabox.yaml").write_text('name: noengine\npython: "3.11"\ncuda: "12.8"\n')
    cli("lock", cwd=tmp_path, check=0)
    proc = cli("build", cwd=tmp_path, env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}, check=5)
    assert proc.stderr.count("\n") == 1 and "no Docker engine answers at unix://" in proc.stderr
    assert "DOCKER_HOST" in proc.stderr
    assert cli("images", "ls", env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}).returncode == 5
