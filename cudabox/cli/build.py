"""`cudabox build`, `cudabox validate` and `cudabox images ls`: make the project's image and prove it works.

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
        con = output.console()
        what = "reused (nothing changed)" if built.reused else f"built in {built.seconds:.1f}s"
        con.print(f"{built.tag}: {what}; stack {built.stack_tag} "
                  f"({'reused' if built.stack_reused else 'built'}); {built.builder}")
        for remote in built.pushed:
            con.print(f"pushed {remote}")
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

        image = project_tag(read_lock(project))
    report = validate_image(image, targets=tuple(target or ()), gpu=not no_gpu)
    if json:
        output.emit_json(dict(report.to_dict(), path=report.path))
    else:
        print_summary(report, output.console())
    if report.exit_code:
        raise typer.Exit(report.exit_code)


@images_app.command("ls")
def images_ls(json: bool = JSON):
    """List the cudabox images in the Docker engine (stacks and projects) with their last validation."""
    from ..engine import connect
    from ..image.validate import list_images

    output.use_json(json)
    rows = list_images(connect())
    if json:
        output.emit_json({"images": rows})
        return
    import datetime

    if not rows:
        print("no cudabox images in this engine; build one with `cudabox build`")
        return
    table = [("IMAGE", "KIND", "ID", "SIZE", "CREATED", "VALIDATION")]
    for r in rows:
        created = datetime.datetime.fromtimestamp(r["created"] or 0).strftime("%Y-%m-%d %H:%M")
        table.append((", ".join(r["tags"]), r["kind"], r["image_id"].split(":")[-1][:12],
                      f"{(r['size_bytes'] or 0) / 1e6:,.0f} MB", created, r["validation"] or "not validated"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:  # plain aligned text: never cut, whatever the terminal width (pipes, CI logs)
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
