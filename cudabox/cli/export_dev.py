"""`cudabox export devcontainer` and `cudabox export compose`: the project's image for editors and Compose.

Thin: parse, call cudabox.jobs.devenv, write. Adds its commands to the `export` group of cli/cluster.py.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .cluster import export_app
from .options import PROJECT

CHECK = typer.Option(False, "--check", help="Write nothing; exit 1 when the file differs from what would be "
                                            "written (stale after `cudabox lock`).")
IMAGE = typer.Option(None, "--image", metavar="REF", help="Use this image instead of the project's "
                                                          "(cudabox/NAME:LOCKHASH-FOLDERKEY).")


def _image(project: Path, image: str | None):
    from ..image.build import project_tag
    from ..lock.lockfile import read_lock

    lock = read_lock(project)
    return lock, image or project_tag(lock, project_dir=project)


def _write(path: Path, text: str, check: bool, what: str) -> None:
    from ..files import write_atomic
    from ..jobs.devenv import check as differs

    if check:
        problem = differs(path, text)
        if problem:
            from ..errors import CheckFailed

            raise CheckFailed(f"{problem}; run `cudabox export {what}`")
        print(f"{path}: up to date")
        return
    write_atomic(path, text)
    output.console(stderr=True).print(f"wrote {path}")


@export_app.command("devcontainer")
def export_devcontainer(
        gpu: str = typer.Option("optional", "--gpu", metavar="optional|required|none",
                                help="hostRequirements.gpu: use the GPUs when the host has them (optional), "
                                     "refuse to start without (required), or none."),
        no_build: bool = typer.Option(False, "--no-build", help="No initializeCommand: don't check the file and "
                                                                "run `cudabox build` on the host first."),
        output_file: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                         help="Where to write (default: PROJECT/.devcontainer/devcontainer.json)."),
        image: str = IMAGE, check: bool = CHECK, project: Path = PROJECT):
    """Write .devcontainer/devcontainer.json: the project opened in its image (VS Code, devcontainer CLI) with
    the GPUs, the project at its workdir, your uid and the caches."""
    from ..jobs.devenv import DEVCONTAINER_FILE, devcontainer, devcontainer_text

    lock, ref = _image(project, image)
    text = devcontainer_text(devcontainer(lock, ref, gpu=gpu, build=not no_build, own_image=image is None))
    _write(output_file or project / DEVCONTAINER_FILE, text, check, "devcontainer")


@export_app.command("compose", context_settings={"allow_interspersed_args": False})
def export_compose(
        command: list[str] = typer.Argument(None, metavar="-- CMD...", help="The service's command (default: "
                                                                          "the image's)."),
        gpus: str = typer.Option("all", "--gpus", metavar="GPUS", help="all | none | N (a count) | 0,2 / "
                                                                     "GPU-<uuid> (device ids)."),
        publish: list[str] = typer.Option(None, "--publish", "-p", metavar="[IP:][HOST:]PORT",
                                          help="Publish a port (on 127.0.0.1 unless an IP is given)."),
        shm_size: str = typer.Option(None, "--shm-size", metavar="SIZE", help="/dev/shm size instead of host IPC."),
        user: str = typer.Option(None, "--user", "-u", metavar="UID[:GID]", help="Run as (default: yours)."),
        output_file: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                         help="Where to write (default: PROJECT/compose.yaml; - for stdout)."),
        image: str = IMAGE, check: bool = CHECK, project: Path = PROJECT):
    """Write compose.yaml: one service running the project's image as `cudabox run` does (GPU reservation,
    host IPC, the project mount, the caches, your uid)."""
    from ..jobs.devenv import COMPOSE_FILE, compose, compose_text
    from ..jobs.run import RunOptions, job_user

    lock, ref = _image(project, image)
    uid, gid = job_user(RunOptions(user=user))
    import os

    to_stdout = output_file == Path("-")
    path = output_file or project / COMPOSE_FILE
    source = str(project.resolve()) if to_stdout else os.path.relpath(project.resolve(), path.parent.resolve())
    config = compose(lock, ref, command=list(command or ()), gpus=gpus, uid=uid, gid=gid,
                     ports=list(publish or ()), shm_size=shm_size, source=source)
    text = compose_text(lock, config)
    if to_stdout:
        import sys

        sys.stdout.write(text)
        return
    _write(path, text, check, "compose")
