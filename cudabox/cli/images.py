"""`cudabox dockerfile` and `cudabox images ...`: render a lock's Dockerfile; generate and check the catalog."""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .options import JSON
from .root import app

images_app = typer.Typer(help="The curated image catalog in images/ (from matrices/catalog.yaml).",
                         no_args_is_help=True)
app.add_typer(images_app, name="images")

OUTPUT_DIR = typer.Option(None, "--output", "-o", metavar="DIR",
                          help="The catalog directory (default: images/ of the cudabox checkout).")


@app.command()
def dockerfile(
    output_path: Path = typer.Option(None, "--output", "-o", metavar="PATH",
                                     help="Write the Dockerfile here (atomically) instead of printing it."),
    project: Path = typer.Option(Path("."), "--project", "-C", metavar="DIR", help="Project directory (holds cudabox.lock)."),
    legacy: bool = typer.Option(False, "--legacy",
                                help="For the legacy builder: no BuildKit --mount (no caches, no build secrets)."),
    installer: str = typer.Option("uv", "--installer", metavar="NAME", help="uv (default) or pip."),
):
    """Render the project's Dockerfile from cudabox.lock (stdout by default)."""
    import sys

    from ..lock.lockfile import read_lock
    from ..image.render import RenderOptions, render

    lock = read_lock(project)
    rendered = render(lock, options=RenderOptions(buildkit=not legacy, installer=installer))
    if output_path is None:
        sys.stdout.write(rendered.dockerfile)
        return
    from ..files import write_atomic

    write_atomic(output_path, rendered.dockerfile)
    output.console(stderr=True).print(f"wrote {output_path} (stack {lock.stack_hash[:12]}, lock {lock.hash[:12]})")


def _plan():
    from ..image.catalog import plan

    return plan()


def _failed(message: str, reasons: list[str]):
    """Exit 1 with the reasons listed (one JSON object with --json), through cudabox's error path."""
    from ..errors import CheckFailed

    error = CheckFailed(message)
    error.reasons = reasons
    return error


@images_app.command("generate")
def generate(json: bool = JSON, output_dir: Path = OUTPUT_DIR):
    """Render every catalog image into images/<framework>/<tag>/ plus images/README.md; delete images the
    catalog no longer lists. Exit 1 when an entry can't be resolved (the others are still written)."""
    from ..image.catalog import default_dir, generate as write_tree

    output.use_json(json)
    root = output_dir or default_dir()
    result = _plan()
    changes = write_tree(root, result)
    failures = [f"{entry.label} ({entry.where}): {why}" for entry, why in result.failures]
    if not json:
        con = output.console()
        con.print(f"{len(result.images)} images in {root}: {len(changes['written'])} file(s) written, "
                  f"{len(changes['deleted'])} deleted")
        for rel in changes["deleted"]:
            con.print(f"  deleted {rel}")
    if failures:
        raise _failed(f"{len(failures)} catalog entr{'y' if len(failures) == 1 else 'ies'} did not resolve "
                      "(the others were written)", failures)
    if json:
        output.emit_json({"directory": str(root), "images": [i.path for i in result.images],
                          "written": changes["written"], "deleted": changes["deleted"]})


@images_app.command("check")
def check(json: bool = JSON, output_dir: Path = OUTPUT_DIR):
    """Exit 1 when images/ differs from what `cudabox images generate` would write (CI runs this)."""
    from ..image.catalog import default_dir, differences

    output.use_json(json)
    root = output_dir or default_dir()
    result = _plan()
    problems = differences(root, result) + [f"unresolved: {entry.label} ({entry.where}): {why}"
                                            for entry, why in result.failures]
    if problems:
        raise _failed(f"{root} is not what `cudabox images generate` would write "
                      f"({len(problems)} difference(s)); run it and commit the result", problems)
    if json:
        output.emit_json({"ok": True, "directory": str(root), "images": len(result.images)})
    else:
        print(f"images check: {len(result.images)} images in {root} — ok")
