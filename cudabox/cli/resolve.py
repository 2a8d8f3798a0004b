"""`cudabox resolve` and `cudabox lock`: pick the stack, explain it, pin it (the work: cli/resolving.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from . import flags, output, resolving
from .options import JSON, NO_HOST, PROJECT as DIRECTORY, option
from .resolving import print_stack
from .root import app

WITH, PYTHON, GPU, DRIVER, CUDA, CUDNN, FLAVOUR, FORWARD, EOL = map(option, (
    flags.WITH, flags.PYTHON, flags.GPU, flags.DRIVER, flags.CUDA, flags.CUDNN, flags.FLAVOUR, flags.FORWARD,
    flags.EOL))


@app.command()
def resolve(with_: list[str] = WITH, python: str = PYTHON, gpu: list[str] = GPU, driver: str = DRIVER,
            cuda: str = CUDA, cudnn: str = CUDNN, flavour: str = FLAVOUR, allow_forward_compat: bool = FORWARD,
            refuse_eol_images: bool = EOL, no_host: bool = NO_HOST, json: bool = JSON,
            project: Path = DIRECTORY):
    """Pick the stack for a project and say why (exit 3 with the reasons when none exists)."""
    resolving.resolve(with_, python, gpu, driver, cuda, cudnn, flavour, allow_forward_compat, refuse_eol_images,
                      no_host, json, project)


UPGRADE = typer.Option(False, "--upgrade", help="Re-pin every package to the newest version the inputs allow.")
UPGRADE_PACKAGE = typer.Option(None, "--upgrade-package", "-P", metavar="PKG",
                               help="Re-pin this package (and only what it forces); repeatable.")
NO_PACKAGES = typer.Option(False, "--no-packages",
                           help="Lock the stack only, no package pins (offline; `cudabox build` refuses such a lock).")


@app.command()
def lock(check: bool = typer.Option(False, "--check",
                                    help="Exit 1 when cudabox.yaml changed since the lock or the lock is not intact."),
         upgrade: bool = UPGRADE, upgrade_package: list[str] = UPGRADE_PACKAGE, no_packages: bool = NO_PACKAGES,
         python: str = PYTHON, gpu: list[str] = GPU, driver: str = DRIVER, cuda: str = CUDA, cudnn: str = CUDNN,
         flavour: str = FLAVOUR, allow_forward_compat: bool = FORWARD, refuse_eol_images: bool = EOL,
         no_host: bool = NO_HOST, json: bool = JSON, project: Path = DIRECTORY):
    """Resolve ./cudabox.yaml, pin and hash every package, and write cudabox.lock atomically.

    Unchanged inputs keep their pins; --upgrade / --upgrade-package refresh them."""
    from ..lock.lockfile import LOCK_FILE, check_lock, read_lock, write_lock
    from ..lock.resolution import lock_project

    output.use_json(json)
    if check:
        why = check_lock(project, build_inputs=True)
        output.emit_json({"stale": False, "detail": why}) if json else print(why)
        return
    spec = resolving.spec(project, None, python=python, gpu=gpu, driver=driver, cuda=cuda, cudnn=cudnn,
                          flavour=flavour, forward=allow_forward_compat, refuse_eol=refuse_eol_images)
    previous = None
    if (project / LOCK_FILE).exists() and not upgrade:
        try:
            previous = read_lock(project)
        except Exception:  # a broken lock is replaced, not a reason to fail
            previous = None
    res, lk = lock_project(spec, no_host=no_host, previous=previous, upgrade=upgrade,
                           upgrade_packages=tuple(upgrade_package or ()), packages=not no_packages)
    from ..interrupt import settled

    settled()  # the lock is decided: a signal from here on must not leave it written with exit 129
    path = write_lock(lk, project)
    if json:
        output.emit_json({"lock": str(path), "lock_hash": lk.hash, "stack_hash": lk.stack_hash,
                          "stack": res.stack.to_dict()})
        return
    print_stack(res.stack, res.others)
    pinned = "" if lk.stack.pins is None else \
        f", {len(lk.stack.pins)} stack + {len(lk.project.pins or ())} project packages pinned"
    output.console().print(f"wrote {LOCK_FILE} (stack {lk.stack_hash[:12]}, lock {lk.hash[:12]}{pinned})")
