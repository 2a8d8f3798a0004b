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


def _plan(root: Path, **how):
    from ..image.catalog import plan

    return plan(root=root, **how)


def _progress(path: str, done: int, total: int, why: str) -> None:
    """One stderr line per image locked (a fresh catalog locks dozens, each a uv run against an index)."""
    import sys

    sys.stderr.write(f"cudabox: [{done}/{total}] {path}: " + (f"not pinned: {why}" if why else "locked") + "\n")
    sys.stderr.flush()


def _failed(message: str, reasons: list[str]):
    """Exit 1 with the reasons listed (one JSON object with --json), through cudabox's error path."""
    from ..errors import CheckFailed

    error = CheckFailed(message)
    error.reasons = reasons
    return error


@images_app.command("generate")
def generate(json: bool = JSON, output_dir: Path = OUTPUT_DIR,
             lock: bool = typer.Option(True, "--lock/--no-lock",
                                       help="Pin and hash the packages of new or changed images (uv, needs the "
                                            "indexes); --no-lock publishes them unpinned."),
             upgrade: bool = typer.Option(False, "--upgrade", help="Re-pin every image's packages to the newest "
                                                                   "its stack allows.")):
    """Render every catalog image into images/<framework>/<tag>/ plus images/README.md; delete images the
    catalog no longer lists. An image keeps its published pins while its stack is unchanged. Exit 1 when
    an entry can't be resolved (the others are still written)."""
    import sys

    from rich.markup import escape

    from ..image.catalog import default_dir, generate as write_tree

    output.use_json(json)
    root = output_dir or default_dir()
    result = _plan(root, lock=lock, upgrade=upgrade, progress=None if json else _progress)
    changes = write_tree(root, result)
    failures = [f"{entry.label} ({entry.where}): {why}" for entry, why in result.failures]
    if not json:
        con = output.console()
        con.print(f"{len(result.images)} images in {escape(str(root))}: {len(changes['written'])} file(s) written, "
                  f"{len(changes['deleted'])} deleted; {len(result.locked)} locked anew, "
                  f"{len(result.unpinned)} unpinned")
        for rel in changes["deleted"]:
            con.print(f"  deleted {escape(rel)}")
        for path, why in sorted(result.unpinned.items()):
            sys.stderr.write(f"note: {path}: packages resolve in its build ({why})\n")
    if failures:
        raise _failed(f"{len(failures)} catalog entr{'y' if len(failures) == 1 else 'ies'} did not resolve "
                      "(the others were written)", failures)
    if json:
        output.emit_json({"directory": str(root), "images": [i.path for i in result.images],
                          "written": changes["written"], "deleted": changes["deleted"],
                          "locked": sorted(result.locked), "unpinned": dict(sorted(result.unpinned.items()))})


@images_app.command("check")
def check(json: bool = JSON, output_dir: Path = OUTPUT_DIR):
    """Exit 1 when images/ differs from what `cudabox images generate` would write (CI runs this). Reads the
    published pins and never locks: no network needed."""
    from ..image.catalog import default_dir, differences

    output.use_json(json)
    root = output_dir or default_dir()
    result = _plan(root)
    problems = differences(root, result) + [f"unresolved: {entry.label} ({entry.where}): {why}"
                                            for entry, why in result.failures]
    if problems:
        raise _failed(f"{root} is not what `cudabox images generate` would write "
                      f"({len(problems)} difference(s)); run it and commit the result", problems)
    if json:
        output.emit_json({"ok": True, "directory": str(root), "images": len(result.images),
                          "unpinned": dict(sorted(result.unpinned.items()))})
    else:
        pinned = len(result.images) - len(result.unpinned)
        print(f"images check: {len(result.images)} images in {root} ({pinned} with locked packages) — ok")
