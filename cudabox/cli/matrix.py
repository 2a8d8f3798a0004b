"""`cudabox matrix ...`: show what the compatibility matrix knows, and check it."""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .options import JSON, PROJECT
from .root import app

matrix_app = typer.Typer(help="Show and check the compatibility matrix (matrices/ + overlays).", rich_markup_mode=None,
                         no_args_is_help=True)
app.add_typer(matrix_app, name="matrix")




def _load(project: Path):
    from ..knowledge.loader import load

    return load(project)


@matrix_app.command("show")
def show(subject: str = typer.Argument(..., metavar="SUBJECT",
                                       help="What to show: cuda, drivers, gpus, cudnn, images, or a framework "
                                            "(matrices/frameworks.yaml)."),
         json: bool = JSON, project: Path = PROJECT):
    """Show one subject of the matrix as a table (or --json)."""
    from ..knowledge.report import subject_rows

    output.use_json(json)
    m = _load(project)
    title, columns, rows, data = subject_rows(m, subject)
    if json:
        output.emit_json(data)
        return
    _table(title, columns, rows)


@matrix_app.command("gpu")
def gpu(name: str = typer.Argument(..., help="GPU name, alias, nvidia-smi name, sm_89 or 8.9."),
        json: bool = JSON, project: Path = PROJECT):
    """What a GPU is, and which CUDA toolkits and framework releases can drive it."""
    from ..knowledge.report import gpu_report

    output.use_json(json)
    m = _load(project)
    report = gpu_report(m, m.gpu(name, where="matrix gpu"))
    if json:
        output.emit_json(report)
        return
    from rich.markup import escape

    con = output.console()
    g = {k: escape(v) if isinstance(v, str) else v for k, v in report["gpu"].items()}  # overlay data, not markup
    con.print(f"[bold]{g['name']}[/]  compute capability {g['cc']} ({g['sm']}, {g['arch']}, {g['class']})")
    if g.get("memory_gb"):
        con.print(f"  memory {g['memory_gb']:g} GB", end="")
        if g.get("peak_bandwidth_gbs"):
            con.print(f", {g['peak_bandwidth_gbs']:g} GB/s", end="")
        if g.get("peak_fp16_tflops"):
            con.print(f", {g['peak_fp16_tflops']:g} TFLOPS dense FP16/BF16", end="")
        con.print()
    if g["status"] != "verified":
        con.print(f"  [yellow]{g['status']}[/]: {g.get('note') or 'see matrices/gpus.yaml'}")
    con.print(f"  forward compatibility: {'eligible (datacenter GPU)' if g['class'] == 'datacenter' else 'no'}")
    tks = report["toolkits"]
    if tks:
        con.print(f"  CUDA toolkits that compile {g['sm']}: {tks[0]['cuda']} .. {tks[-1]['cuda']} "
                  f"(needs driver >= {tks[0]['min_driver'] or '?'} natively)")
    else:
        con.print(f"  [red]no CUDA toolkit in the matrix compiles {g['sm']}[/]")
    rows = [(f["framework"], f["series"], f["variants"]) for f in report["frameworks"]]
    _table("Framework releases with a build for this GPU", ["framework", "release", "builds (how)"], rows)
    for line in report["refused"]:
        con.print(f"  [dim]no: {escape(line)}[/]")


@matrix_app.command("check")
def check(project: Path = PROJECT, json: bool = JSON,
          strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors.")):
    """Cross-check the matrix; exit 1 on any error (CI runs this)."""
    from ..knowledge.check import check as run_check

    output.use_json(json)
    result = run_check(_load(project))
    failed = bool(result.errors or (strict and result.warnings))
    if json:
        output.emit_json({"ok": not failed, "errors": result.errors, "warnings": result.warnings})
    else:
        for w in result.warnings:
            print(f"warning: {w}")
        for e in result.errors:
            print(f"error: {e}")
        print(f"matrix check: {len(result.errors)} error(s), {len(result.warnings)} warning(s)"
              + (" — FAILED" if failed else " — ok"))
    if failed:
        raise typer.Exit(1)


def _table(title, columns, rows):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*[escape(str(c)) if c is not None else "—" for c in row])  # data, not markup
    output.console().print(table)
