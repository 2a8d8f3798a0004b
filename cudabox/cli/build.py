"""`cudabox build`, `cudabox validate`, `cudabox images ls` and `images prune`: make the project's image and prove it works.

Thin: parse, call cudabox.image.build / cudabox.image.validate, print. Heavy imports
(docker, rich, jinja2) happen inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .options import JSON, PROJECT
from .root import app
from .images import images_app

DOCKER = typer.Option(None, "--docker", metavar="PATH",
                      help="The docker CLI for BuildKit builds (also CUDABOX_DOCKER). Default: the first on PATH "
                           "that can BuildKit; without one, the legacy builder through the Docker API.")


@app.command()
def build(
    project: Path = PROJECT,
    plain: bool = typer.Option(False, "--plain", help="Print the builder's own log lines instead of a progress view."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Rebuild every step (the stack too) without the cache."),
    no_validate: bool = typer.Option(False, "--no-validate", help="Skip the smoke test after the build."),
    push: str = typer.Option(None, "--push", metavar="REGISTRY",
                             help="Also tag REGISTRY/<image> for the stack and the project image and push both."),
    platform: str = typer.Option(None, "--platform", metavar="OS/ARCH",
                                 help="Target platform (e.g. linux/arm64); non-native images get their own tags."),
    ca_cert: Path = typer.Option(None, "--ca-cert", metavar="PATH",
                                 help="CA bundle that apt, pip and uv trust during the build, passed as a BuildKit "
                                      "secret (never stored in the image). Also CUDABOX_CA_CERT or ca_cert: in "
                                      "cudabox.yaml."),
    docker: str = DOCKER,
    json: bool = JSON,
):
    """Build the project's image from cudabox.lock (stack image shared, reused when present), then validate it.

    Exit 0 when built (the smoke test passed, with or without a GPU), 1 when the build or the smoke test
    failed, 5 when no Docker engine answers."""
    from ..image.build import ensure_image

    output.use_json(json)
    built = ensure_image(project, plain=plain, no_cache=no_cache, ca_cert=ca_cert, validate=not no_validate,
                         progress=True, platform=platform, push=push, docker=docker)
    if json:
        output.emit_json(built.to_dict())
    else:
        from rich.markup import escape

        con = output.console()
        what = "reused (nothing changed)" if built.reused else f"built in {built.seconds:.1f}s"
        con.print(escape(f"{built.tag}: {what}; stack {built.stack_tag} "
                         f"({'reused' if built.stack_reused else 'built'}); {built.builder}"))
        for remote in built.pushed:
            con.print(f"pushed {escape(remote)}")
        if built.validation is not None:
            from ..image.validate import print_summary

            print_summary(built.validation, con)
    if built.validation is not None and built.validation.status == "failed":
        raise typer.Exit(1)


@app.command()
def validate(
    image: str = typer.Argument(None, metavar="IMAGE",
                                help="Image tag or ID (default: the project's image, from cudabox.lock)."),
    target: list[str] = typer.Option(None, "--target", metavar="sm_XY",
                                     help="Also require this GPU architecture (sm_120, 12.0); repeatable."),
    no_gpu: bool = typer.Option(False, "--no-gpu", help="Don't pass GPUs to the container even when possible."),
    project: Path = PROJECT,
    json: bool = JSON,
):
    """Run the image's smoke test in a container (with the GPUs when the engine has an NVIDIA runtime).

    Exit 0 passed, 1 failed, 4 passed-without-gpu (everything that needs no GPU passed). The report is
    stored by image ID under the user cache dir (see `cudabox images ls`)."""
    from ..image.validate import print_summary, validate_image

    output.use_json(json)
    if image is None:
        from ..image.build import project_tag
        from ..lock.lockfile import read_lock

        image = project_tag(read_lock(project), project_dir=project)
    report = validate_image(image, targets=tuple(target or ()), gpu=not no_gpu)
    if json:
        output.emit_json(dict(report.to_dict(), path=report.path))
    else:
        print_summary(report, output.console())
    if report.exit_code:
        raise typer.Exit(report.exit_code)


@images_app.command("ls")
def images_ls(json: bool = JSON):
    """List the cudabox images in the Docker engine: size, stack, the projects on this machine whose lock
    uses it, when it last ran (`cudabox run`), and its last validation."""
    from ..engine import connect
    from ..image.prune import inventory, short
    from ..image.validate import load_report

    output.use_json(json)
    images, _ = inventory(connect())
    reports = {i.image_id: load_report(i.image_id) for i in images}
    if json:
        output.emit_json({"images": [dict(i.to_dict(), validation=r.status if r else None,
                                          validated_at=r.validated_at if r else None)
                                     for i, r in ((i, reports[i.image_id]) for i in images)]})
        return
    if not images:
        print("no cudabox images in this engine; build one with `cudabox build`")
        return
    table = [("IMAGE", "KIND", "SIZE", "STACK", "PROJECTS", "LAST RUN", "VALIDATION")]
    for i in images:
        report = reports[i.image_id]
        table.append((", ".join(i.tags), i.kind, f"{i.size / 1e6:,.0f} MB", i.stack or i.stack_hash[:12],
                      ", ".join(short(p) for p in i.projects) or "-", _when(i.last_run),
                      report.status if report else "not validated"))
    _print_table(table)


def _when(stamp) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M") if stamp else "never"


def _print_table(table) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:  # plain aligned text: never cut, whatever the terminal width (pipes, CI logs)
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


@images_app.command("prune")
def images_prune(
        yes: bool = typer.Option(False, "--yes", "-y", help="Remove them (without it: print what would go and the "
                                                            "space it frees; nothing is removed)."),
        unused_days: float = typer.Option(None, "--unused-days", metavar="N", min=0,
                                          help="Also remove referenced images not run (nor built) for N days."),
        builder_cache: bool = typer.Option(False, "--builder-cache", help="Also drop the engine's unused build "
                                                                         "cache (all of it, not only cudabox's)."),
        match: list[str] = typer.Option(None, "--match", metavar="GLOB",
                                        help="Only images with a tag matching GLOB (cudabox/myproj:*); repeatable."),
        json: bool = JSON):
    """Remove cudabox images no project on this machine uses (their lock is gone or changed). Dry run unless
    --yes; never touches images cudabox didn't build, nor ones a container or a kept image uses."""
    from ..engine import connect
    from ..image import prune

    output.use_json(json)
    engine = connect()
    images, chains = prune.inventory(engine)
    result = prune.plan(images, chains, unused_days=unused_days, match=tuple(match or ()))
    cache = engine.build_cache() if builder_cache else None
    removed, failed = [], []
    if yes:
        for image, why in prune.remove(engine, result.remove):
            (failed if why else removed).append((image, why))
        if builder_cache:
            cache = engine.build_cache(prune=True)
    if json:
        obj = dict(result.to_dict(), dry_run=not yes, builder_cache_bytes=cache,
                   removed=[i.image_id for i, _ in removed], failed=[{"image_id": i.image_id, "why": w}
                                                                    for i, w in failed])
        output.emit_json(obj)
    else:
        verb = "removed" if yes else "would remove"
        for image in result.remove:
            print(f"{verb}: {', '.join(image.tags)} ({image.kind}, {image.size / 1e6:,.0f} MB)")
        for image, why in result.keep:
            print(f"keep: {', '.join(image.tags)} ({why})")
        for image, why in failed:
            print(f"could not remove {', '.join(image.tags)}: {why}")
        line = f"{verb} {len(result.remove)} image(s), freeing {result.freed / 1e6:,.0f} MB"
        if cache is not None:
            line += f"; build cache: {cache / 1e6:,.0f} MB {'freed' if yes else 'reclaimable'}"
        print(line + ("" if yes or not (result.remove or cache) else "; run again with --yes to remove"))
    if failed:
        raise typer.Exit(1)
