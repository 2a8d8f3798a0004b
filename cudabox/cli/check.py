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
        print(nodecheck.format_text(report))
    raise typer.Exit(report["exit_code"])
