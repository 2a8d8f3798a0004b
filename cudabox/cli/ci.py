"""`cudabox ci ...`: the image catalog in CI (matrix, bake file, build + validate, the workflow and its check).

Thin: parse, call cudabox.ci.workflow / cudabox.ci.build, print.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .options import JSON
from .root import app

ci_app = typer.Typer(help="Build and validate the image catalog in CI: a GitHub Actions matrix, a "
                          "docker-bake.json, `ci build`, and .github/workflows/images.yml (docs/ci.md).",
                     no_args_is_help=True, rich_markup_mode=None)
app.add_typer(ci_app, name="ci")

CATALOG = typer.Option(None, "--catalog", metavar="DIR", help="The catalog directory (default: images/ of "
                                                              "the cudabox checkout).")
FILTER = typer.Option(None, "--filter", "-f", metavar="EXPR",
                      help="Only matching images; repeat for OR. Terms (ANDed): a glob on framework/tag, "
                           "KEY=GLOB, KEY!=GLOB or KEY>=VERSION (keys: framework, tag, image, cuda, python, "
                           "flavour, version, cudnn). E.g. 'cuda/*', 'framework=torch cuda>=12.8'.")
RUNNER = typer.Option(None, "--runner", metavar="LABEL",
                      help="Runner label of the build job; repeatable (default: self-hosted linux x64 gpu).")
WORKFLOW = typer.Option(None, "--workflow", metavar="PATH",
                        help="The workflow file (default: .github/workflows/images.yml of the checkout).")
CA_CERT = typer.Option(None, "--ca-cert", metavar="PEM", envvar="CUDABOX_CA_CERT",
                       help="CA bundle for PyPI behind a TLS-intercepting proxy (a BuildKit secret, never stored).")


def _images(catalog: Path | None, filters: list[str] | None):
    from ..ci.workflow import load_images, select

    return select(load_images(catalog), filters)


@ci_app.command("matrix")
def matrix(json: bool = JSON, filter_: list[str] = FILTER, catalog: Path = CATALOG):
    """The GitHub Actions matrix (`include:` one entry per image); --json prints it on one line for
    `echo "matrix=$(cudabox ci matrix --json)" >> "$GITHUB_OUTPUT"`."""
    import json as json_mod

    from ..ci.workflow import matrix as build_matrix

    output.use_json(json)
    data = build_matrix(_images(catalog, filter_))
    if json:
        print(json_mod.dumps(data, separators=(",", ":")))
        return
    print(f"{'IMAGE':36} {'CUDA':6} {'PYTHON':7} ID")
    for entry in data["include"]:
        print(f"{entry['image']:36} {entry['cuda']:6} {entry['python']:7} {entry['id']}")


@ci_app.command("bake")
def bake(output_file: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                          help="Write here (atomically) instead of printing."),
         filter_: list[str] = FILTER, ca_cert: str = CA_CERT, catalog: Path = CATALOG):
    """docker-bake.json for `docker buildx bake` (one target per image, shared stages as contexts).
    Contexts are relative to where the file is written (stdout: the current directory)."""
    import json as json_mod
    import os
    import sys

    from ..ci.workflow import bake as build_bake, catalog_dir

    root = Path(catalog or catalog_dir()).resolve()
    base = Path(output_file).resolve().parent if output_file else Path.cwd()
    context = os.path.relpath(root, base)
    text = json_mod.dumps(build_bake(_images(root, filter_), root, context=context, ca_cert=ca_cert),
                          indent=2) + "\n"
    if output_file is None:
        sys.stdout.write(text)
        return
    from ..files import write_atomic

    write_atomic(output_file, text)
    output.console(stderr=True).print(f"wrote {output_file}")


@ci_app.command("build")
def build(parallel: int = typer.Option(1, "--parallel", "-j", min=1, metavar="N", help="Builds at a time."),
          filter_: list[str] = FILTER,
          on: str = typer.Option("local", "--on", metavar="local|slurm", help="local (this engine) or slurm (a job array, one "
                                                        "image per task)."),
          junit: Path = typer.Option(None, "--junit", metavar="PATH", help="Write a JUnit XML report here."),
          summary: Path = typer.Option(None, "--summary", metavar="PATH", help="Write a Markdown summary here."),
          ca_cert: str = CA_CERT,
          registry: str = typer.Option("cudabox", "--registry", metavar="PREFIX",
                                       help="Tag images PREFIX/framework:tag."),
          no_cache: bool = typer.Option(False, "--no-cache", help="Build without the build cache."),
          partition: str = typer.Option(None, "--partition", metavar="P", envvar="CUDABOX_SLURM_PARTITION",
                                        help="--on slurm: the partition."),
          time: str = typer.Option(None, "--time", metavar="T", envvar="CUDABOX_SLURM_TIME",
                                   help="--on slurm: time limit per task."),
          gpus: int = typer.Option(0, "--gpus", min=0, metavar="N", help="--on slurm: GPUs per task (so the "
                                                                           "smoke test measures them)."),
          report_dir: Path = typer.Option(Path("ci-reports"), "--report-dir", metavar="DIR",
                                          help="--on slurm: task logs and reports (nodes must see it)."),
          json: bool = JSON, catalog: Path = CATALOG):
    """Build and validate catalog images; JUnit XML and a Markdown summary. Exit 1 when any fails
    (passed-without-gpu counts as passing: no GPU here is not the image's fault)."""
    from ..ci.workflow import catalog_dir
    from ..ci.build import build_all, default_ca_cert, junit as junit_xml, run_on_slurm, summary as summary_md
    from ..errors import CheckFailed, InputError
    from ..files import write_atomic

    output.use_json(json)
    root = Path(catalog or catalog_dir()).resolve()
    images = _images(root, filter_)
    if not images:
        raise InputError(f"--filter {' | '.join(filter_ or [])}: no catalog image matches "
                         "(see `cudabox ci matrix`)")
    ca = default_ca_cert(ca_cert)
    if on == "slurm":
        results = run_on_slurm(images, root, report_dir, partition=partition, time_limit=time, gpus=gpus,
                               parallel=parallel if parallel > 1 else None, ca_cert=ca, registry=registry)
    elif on == "local":
        results = build_all(images, root, parallel=parallel, ca_cert=ca, no_cache=no_cache, registry=registry)
    else:
        raise InputError(f"--on {on}: expected local or slurm")
    if junit:
        write_atomic(junit, junit_xml(results))
    if summary:
        write_atomic(summary, summary_md(results))
    failed = [r for r in results if not r.ok]
    if json:
        output.emit_json({"results": [dict(r.__dict__) for r in results], "failed": len(failed)})
    else:
        print(summary_md(results), end="")
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(results)} image(s) failed: "
                          + ", ".join(f"{r.image} ({r.status})" for r in failed))


def _workflow_text(catalog, runner, target: Path):
    """The workflow as generated; without --runner, the labels the existing file uses (else the default)."""
    from ..ci.workflow import DEFAULT_RUNNER, current_runner, load_images, workflow

    labels = tuple(runner or ()) or current_runner(target) or DEFAULT_RUNNER
    return workflow(load_images(catalog), runner=labels)


def _workflow_path(path: Path | None) -> Path:
    from .. import paths
    from ..ci.workflow import WORKFLOW

    return Path(path) if path else paths.in_checkout(str(WORKFLOW), "--workflow PATH")


@ci_app.command("workflow")
def workflow(path: Path = WORKFLOW, runner: list[str] = RUNNER, catalog: Path = CATALOG):
    """Write .github/workflows/images.yml from images/ (generated-files checks, then build + validate each image
    on a GPU runner)."""
    from ..files import write_atomic

    target = _workflow_path(path)
    text = _workflow_text(catalog, runner, target)
    from ..files import read_input_text

    changed = not target.is_file() or read_input_text(target) != text
    if changed:
        write_atomic(target, text)
    output.console(stderr=True).print(f"{'wrote' if changed else 'unchanged:'} {target}")


@ci_app.command("check")
def check(path: Path = WORKFLOW, runner: list[str] = RUNNER, catalog: Path = CATALOG, json: bool = JSON):
    """Exit 1 when the workflow file differs from what `cudabox ci workflow` would write (CI runs this)."""
    from ..ci.workflow import workflow_drift
    from ..errors import CheckFailed

    output.use_json(json)
    target = _workflow_path(path)
    drift = workflow_drift(target, _workflow_text(catalog, runner, target))
    if drift:
        error = CheckFailed(f"{target} is not what `cudabox ci workflow` would write; run it and commit the result")
        error.reasons = drift
        raise error
    if json:
        output.emit_json({"ok": True, "workflow": str(target)})
    else:
        print(f"ci check: {target} — ok")
