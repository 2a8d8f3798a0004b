"""`cudabox check`: the smoke test on this node, no container (docs/check.md).

The same options also parse without typer (cudabox/entry.py), so that `python -m cudabox check` runs on
a bare GPU node; both take their help texts from cudabox.jobs.nodecheck.HELP.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .root import app
from ..jobs.nodecheck import HELP


@app.command()
def check(level: str = typer.Option("2", "--level", metavar="1|2|3", help=HELP["level"]),
          python: str = typer.Option(None, "--python", metavar="PATH", help=HELP["python"]),
          lock: bool = typer.Option(False, "--lock", help=HELP["lock"]),
          project: Path = typer.Option(Path("."), "--project", "-C", metavar="DIR", help=HELP["project"]),
          device: int = typer.Option(None, "--device", min=0, metavar="N", help=HELP["device"]),
          gpus: int = typer.Option(None, "--gpus", min=0, metavar="N", help=HELP["gpus"]),
          duration: float = typer.Option(30.0, "--duration", min=1.0, metavar="SECONDS", help=HELP["duration"]),
          gemm_size: int = typer.Option(None, "--gemm-size", min=16, metavar="N", help=HELP["gemm_size"]),
          target: list[str] = typer.Option(None, "--target", metavar="sm_XY", help=HELP["target"]),
          results_dir: Path = typer.Option(None, "--results-dir", metavar="DIR", help=HELP["results_dir"]),
          no_save: bool = typer.Option(False, "--no-save", help=HELP["no_save"]),
          json: bool = typer.Option(False, "--json", help=HELP["json"])):
    """Is this GPU node healthy? The smoke test on the host itself: driver, GPUs, CUDA libraries, kernels,
    bandwidth and GEMM against the datasheet. Exit 0 passed, 1 failed, 4 passed without a GPU."""
    from ..jobs import nodecheck

    output.use_json(json)
    options = nodecheck.Options(level=nodecheck.parse_level(level), python=python, lock=lock, project=project,
                                device=device, gpus=gpus, duration=duration, gemm_size=gemm_size,
                                targets=tuple(target or ()), results_dir=results_dir, save=not no_save)
    report = nodecheck.check(options)
    if json:
        output.emit_json(report)
    else:
        from ..jobs.noderesults import format_text

        print(format_text(report))
    raise typer.Exit(report["exit_code"])


# --------------------------------------------------------------------------- on a cluster's nodes

from .cluster import export_app  # noqa: E402 - the `export` group lives with the other cluster commands


@export_app.command("slurm-healthcheck")
def export_slurm_healthcheck(
        level: str = typer.Option("1", "--level", metavar="1|2|3", help="The check's level (1 quick: seconds)."),
        cudabox_python: str = typer.Option(None, "--cudabox-python", metavar="PATH",
                                           help="The Python that runs cudabox on the nodes (default: this one)."),
        python: str = typer.Option(None, "--python", metavar="PATH", help=HELP["python"]),
        gpus: int = typer.Option(None, "--gpus", min=0, metavar="N",
                                 help="GPUs every node must show (default: the node's Gres gpu count)."),
        results_dir: str = typer.Option(None, "--results-dir", metavar="DIR", help=HELP["results_dir"]),
        output_file: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                         help="Write the script here (atomically, executable) instead of printing it.")):
    """A script for Slurm's HealthCheckProgram or Prolog: drains a node failing `cudabox check` (with the
    reason), resumes a node it drained once it passes."""
    from ..jobs.healthcheck import slurm_script
    from ..jobs.nodecheck import parse_level

    text = slurm_script(level=parse_level(level), python=cudabox_python, check_python=python, gpus=gpus,
                        results_dir=results_dir)
    _write(text, output_file, 0o755, "the health-check script")


@export_app.command("k8s-check")
def export_k8s_check(
        nodes: int = typer.Option(1, "--nodes", min=1, metavar="N", help="GPU nodes to check: one pod each."),
        gpus: int = typer.Option(1, "--gpus", min=1, metavar="N", help="GPUs each pod asks for and checks."),
        level: str = typer.Option("1", "--level", metavar="1|2|3", help="The smoke test's level (1 quick)."),
        name: str = typer.Option(None, "--name", metavar="NAME", help="Job name (default: cudabox-check-PROJECT-LOCKHASH)."),
        namespace: str = typer.Option(None, "--namespace", "-n", metavar="NS", help="metadata.namespace."),
        registry: str = typer.Option(None, "--registry", metavar="HOST/PATH", envvar="CUDABOX_REGISTRY",
                                     help="Registry prefix the nodes pull the project's image from."),
        image: str = typer.Option(None, "--image", metavar="REF", help="Check with this image instead of the project's."),
        output_file: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                         help="Write the Job here (atomically) instead of printing it."),
        project: Path = typer.Option(Path("."), "--project", "-C", metavar="DIR", help=HELP["project"])):
    """An Indexed Job that runs the project image's quick smoke test on N GPU nodes, one pod per node."""
    from ..image.build import project_tag
    from ..jobs.healthcheck import k8s_check_job
    from ..jobs.k8s import to_yaml
    from ..jobs.nodecheck import parse_level
    from ..lock.lockfile import read_lock

    lock = read_lock(project)
    ref = image or project_tag(lock, project_dir=project)
    if registry and not image:
        ref = f"{registry.rstrip('/')}/{ref}"
    manifest = k8s_check_job(lock, image=ref, nodes=nodes, gpus=gpus, level=parse_level(level),
                             name=name, namespace=namespace)
    _write(to_yaml(manifest), output_file, None, f"Job {manifest['metadata']['name']}")


def _write(text: str, path: Path | None, mode: int | None, what: str) -> None:
    if path is None:
        import sys

        sys.stdout.write(text)
        return
    from ..files import write_atomic

    write_atomic(path, text, mode=mode)
    output.console(stderr=True).print(f"wrote {path} ({what})")
