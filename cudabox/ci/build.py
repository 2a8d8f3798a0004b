"""`cudabox ci build`: build and validate catalog images, and report them the way CI systems read reports.

Each image is built from its own published Dockerfile (context images/,
target `stack`), exactly what `docker buildx bake` and the workflow build, so
CI proves the committed files, not a re-rendering of them. Then its smoke
test runs (cudabox.image.validate); GEMM TFLOPS are reported only when a GPU ran
it. Results go to a JUnit XML file (one testcase per image) and a Markdown
table. `--on slurm` turns the same command into a Slurm job array: one task
per image, each running `cudabox ci build --filter <that image>` on a node;
their reports are merged when the array ends.
"""

from __future__ import annotations

import re
import shlex
import socket
import sys
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .workflow import CatalogImage
from ..errors import EnvironmentProblem, InputError
from ..trust import ca_bundle

OK = ("passed", "passed-without-gpu")


@dataclass
class Result:
    image: str  # framework/tag
    status: str  # passed | passed-without-gpu | failed (validation) | build-failed | error
    tag: str | None = None
    seconds: float = 0.0  # build time
    size: int | None = None  # bytes
    tflops: float | None = None  # GEMM, only when a GPU ran the smoke test
    message: str = ""
    details: list[str] = field(default_factory=list)
    validate_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in OK


def _say(text: str) -> None:
    sys.stderr.write(f"cudabox: {text}\n")
    sys.stderr.flush()


def build_one(engine, root: Path, image: CatalogImage, *, ca_cert: str | None = None, no_cache: bool = False,
              registry: str = "cudabox", validate: bool = True) -> Result:
    """Build one catalog image from its Dockerfile, tag it REGISTRY/framework:tag, validate it."""
    from ..image import validate as validate_mod
    from ..engine import BuildError, BuildRequest

    req = BuildRequest(context=Path(root), dockerfile=f"{image.path}/Dockerfile", target="stack",
                       secrets={"ca_cert": ca_cert} if ca_cert else {}, no_cache=no_cache)
    _say(f"building {image.path}")
    started = time.monotonic()
    try:
        image_id = engine.build(req, lambda event: None)
    except BuildError as exc:
        line, tail = exc.log.failure()
        return Result(image.path, "build-failed", seconds=time.monotonic() - started, message=line,
                      details=list(tail))
    seconds = time.monotonic() - started
    tag = f"{registry}/{image.image}"
    engine.tag(image_id, tag)
    size = (engine.image(image_id) or {}).get("Size")
    if not validate:
        return Result(image.path, "passed-without-gpu", tag, seconds, size, message="not validated (--no-validate)")
    started = time.monotonic()
    report = validate_mod.validate_image(tag, engine=engine)
    tflops = report.perf.get("gemm_tflops") if report.gpu else None
    failures = [f"{c.name}: {c.detail}" for c in report.failures()]
    message = "; ".join(failures) if failures else (f"no GPU: {report.gpu_reason}" if not report.gpu else "")
    return Result(image.path, report.status, tag, seconds, size, tflops, message,
                  [f"{c.status:4} {c.name}: {c.detail}" for c in report.checks], time.monotonic() - started)


def build_all(images: list[CatalogImage], root: Path, *, parallel: int = 1, ca_cert: str | None = None,
              no_cache: bool = False, registry: str = "cudabox", validate: bool = True, engine=None) -> list[Result]:
    """Build (and validate) every image, `parallel` at a time; a failure never stops the others."""
    from ..engine import connect

    if parallel < 1:
        raise InputError("--parallel: must be >= 1")
    engine = engine or connect()
    if not engine.builder.buildkit:  # catalog Dockerfiles use RUN --mount (caches, the CA secret)
        raise EnvironmentProblem(f"the catalog needs BuildKit; {engine.builder.why}",
                                 hint="install docker-buildx, or use a docker CLI < 23 with DOCKER_BUILDKIT=1")

    def one(image):
        try:
            result = build_one(engine, root, image, ca_cert=ca_cert, no_cache=no_cache, registry=registry,
                               validate=validate)
        except Exception as exc:  # noqa: BLE001 - one image's engine trouble must not lose the others' results
            result = Result(image.path, "error", message=f"{type(exc).__name__}: {exc}")
        _say(f"{'ok  ' if result.ok else 'FAIL'} {image.path}: {result.status} ({result.seconds:.0f}s build"
             + (f", {_size(result.size)}" if result.size else "") + ")"
             + (f": {result.message}" if result.message and not result.ok else ""))
        return result

    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        return list(pool.map(one, images))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP reach this thread only: stop the builders in the others
        engine.cancel_builds()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- reports


def _size(size: int | None) -> str:
    return "—" if not size else f"{size / 1e6:.0f} MB" if size < 1e9 else f"{size / 1e9:.2f} GB"


def junit(results: list[Result], suite: str = "cudabox-images") -> str:
    """JUnit XML: a testcase per image; build and validation failures as <failure>, crashes as <error>."""
    failures = sum(r.status in ("failed", "build-failed") for r in results)
    errors = sum(r.status == "error" for r in results)
    total = sum(r.seconds + r.validate_seconds for r in results)
    root = ET.Element("testsuites", name="cudabox ci build", tests=str(len(results)), failures=str(failures),
                      errors=str(errors), time=f"{total:.1f}")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)), failures=str(failures),
                       errors=str(errors), skipped="0", time=f"{total:.1f}", hostname=socket.gethostname(),
                       timestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    for r in results:
        framework, _, tag = r.image.partition("/")
        case = ET.SubElement(ts, "testcase", classname=f"images.{framework}", name=tag,
                             time=f"{r.seconds + r.validate_seconds:.1f}")
        if r.status in ("failed", "build-failed"):
            kind = "build" if r.status == "build-failed" else "validation"
            ET.SubElement(case, "failure", message=f"{kind} failed: {r.message}"[:1000], type=kind).text = \
                "\n".join(r.details)
        elif r.status == "error":
            ET.SubElement(case, "error", message=r.message[:1000], type="error").text = "\n".join(r.details)
        out = [f"status: {r.status}", f"image: {r.tag or '-'}", f"build: {r.seconds:.1f}s",
               f"size: {_size(r.size)}", f"gemm_tflops: {r.tflops if r.tflops is not None else '-'}"]
        if r.message:
            out.append(f"note: {r.message}")
        ET.SubElement(case, "system-out").text = "\n".join(out + r.details)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def summary(results: list[Result]) -> str:
    """A Markdown table for $GITHUB_STEP_SUMMARY and humans."""
    passed = sum(r.ok for r in results)
    lines = [f"### cudabox ci build: {passed}/{len(results)} images ok", "",
             "| image | size | build time | validation | GEMM TFLOPS |", "|---|---|---|---|---|"]
    for r in results:
        tflops = f"{r.tflops:.1f}" if r.tflops is not None else "—"
        lines.append(f"| `{r.image}` | {_size(r.size)} | {r.seconds:.0f} s | {r.status} | {tflops} |")
    failed = [r for r in results if not r.ok]
    if failed:
        lines += [""] + [f"- `{r.image}`: {r.status}: {r.message}" for r in failed]
    notes: dict[str, int] = {}
    for r in results:
        if r.ok and r.message:
            notes[r.message] = notes.get(r.message, 0) + 1
    lines += [""] * bool(notes) + [f"- {n} image(s): {text}" for text, n in notes.items()]
    return "\n".join(lines) + "\n"


def read_junit(path: Path) -> list[Result]:
    """Results back from a JUnit file this module wrote (merging a Slurm array's tasks)."""
    results = []
    for case in ET.parse(path).getroot().iter("testcase"):
        text = (case.findtext("system-out") or "").splitlines()
        info = dict(line.split(": ", 1) for line in text if ": " in line and line.split(": ", 1)[0] in
                    ("status", "image", "build", "size", "gemm_tflops", "note"))
        framework = case.get("classname", "images.?").split(".", 1)[-1]
        tflops = info.get("gemm_tflops", "-")
        results.append(Result(f"{framework}/{case.get('name')}", info.get("status", "error"),
                              None if info.get("image") in (None, "-") else info["image"],
                              float(info.get("build", "0s").rstrip("s") or 0), _parse_size(info.get("size")),
                              None if tflops == "-" else float(tflops),
                              info.get("note", "")))
    return results


def _parse_size(text: str | None) -> int | None:
    m = re.match(r"([\d.]+) (MB|GB)", text or "")
    return int(float(m.group(1)) * (1e6 if m.group(2) == "MB" else 1e9)) if m else None


# --------------------------------------------------------------------------- --on slurm


def array_script(images: list[CatalogImage], root: Path, out_dir: Path, *, partition: str | None = None,
                 time_limit: str | None = None, gpus: int = 0, parallel: int | None = None,
                 ca_cert: str | None = None, registry: str = "cudabox") -> str:
    """An sbatch job array: task i builds images[i] with this same cudabox, on whichever node runs it."""
    from ..jobs.slurm import PARTITION, SAFE, TIME

    if partition and not PARTITION.match(partition):
        raise InputError(f"--partition: {partition!r} is not a partition name")
    if time_limit and not TIME.match(time_limit):
        raise InputError(f"--time: {time_limit!r}: expected minutes, HH:MM:SS or D-HH:MM:SS")
    if not SAFE.match(str(out_dir)):
        raise InputError(f"{out_dir}: the report directory must not contain spaces (it goes on an #SBATCH line)")
    q = shlex.quote
    throttle = f"%{parallel}" if parallel else ""
    lines = ["#!/bin/bash", "# Generated by `cudabox ci build --on slurm`: one catalog image per array task.",
             "#SBATCH --job-name=cudabox-ci-build", "#SBATCH --comment=cudabox:ci-build",
             f"#SBATCH --array=0-{len(images) - 1}{throttle}", f"#SBATCH --output={out_dir}/task-%a.out"]
    lines += [f"#SBATCH --partition={partition}"] if partition else []
    lines += [f"#SBATCH --time={time_limit}"] if time_limit else []
    lines += [f"#SBATCH --gpus-per-node={gpus}"] if gpus else []
    cmd = [sys.executable, "-m", "cudabox", "ci", "build", "--catalog", str(root), "--registry", registry]
    cmd += ["--ca-cert", ca_cert] if ca_cert else []
    lines += ["set -euo pipefail", "images=(" + " ".join(q(i.path) for i in images) + ")",
              'task="${SLURM_ARRAY_TASK_ID}"',
              " ".join(q(c) for c in cmd) + ' --filter "${images[$task]}" '
              f'--junit {q(str(out_dir))}/junit-"$task".xml --summary {q(str(out_dir))}/summary-"$task".md']
    return "\n".join(lines) + "\n"


def run_on_slurm(images: list[CatalogImage], root: Path, out_dir: Path, *, poll: float = 2.0, **kw) -> list[Result]:
    """Submit the array, wait for every task, merge their JUnit files (a task without one is an error)."""
    from ..jobs.slurmctl import TERMINAL, cancel, show_jobs, submit

    if not images:
        raise InputError("no image matches the filter")
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in list(out_dir.glob("junit-*.xml")) + list(out_dir.glob("summary-*.md")):
        old.unlink()
    job_id = submit(array_script(images, Path(root).resolve(), out_dir, **kw), keep_dir=out_dir)
    _say(f"submitted Slurm array job {job_id}: {len(images)} task(s); logs in {out_dir}")
    seen: dict[str, str] = {}
    try:
        while True:
            code, rows, _ = show_jobs(job_id)
            for row in rows:
                task, state = row.get("ArrayTaskId", "?"), row.get("JobState", "?")
                if seen.get(task) != state:
                    seen[task] = state
                    _say(f"array {job_id} task {task}: {state}")
            pending = [r for r in rows if (r.get("JobState") or "?").split()[0] not in TERMINAL]
            if code == 0 and rows and not pending:
                break
            if code != 0 and seen:  # purged already: it ended
                break
            time.sleep(poll)
    except KeyboardInterrupt:
        cancel(job_id)
        _say(f"interrupted: cancelled Slurm array job {job_id}")
        raise
    results = []
    for i, image in enumerate(images):
        path = out_dir / f"junit-{i}.xml"
        if path.is_file():
            results += read_junit(path)
        else:
            state = seen.get(str(i), "?")
            results.append(Result(image.path, "error",
                                  message=f"task {i} wrote no report (state {state}; see {out_dir}/task-{i}.out)"))
    return results


def default_ca_cert(flag: str | None) -> str | None:
    """The bundle catalog builds use to reach PyPI through a TLS-intercepting proxy (trust.ca_bundle)."""
    found = ca_bundle(flag)
    return str(found[0]) if found else None
