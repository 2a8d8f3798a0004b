"""`cudabox resolve` and `cudabox lock`: pick the stack, explain it, pin it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from . import output
from .options import JSON, NO_HOST, PROJECT as DIRECTORY
from .root import app

WITH = typer.Option(None, "--with", "-w", metavar="REQ",
                    help="A requirement (PEP 508), repeatable. Without it, ./cudabox.yaml is read.")
PYTHON = typer.Option(None, "--python", metavar="SPEC", help="Python version or specifier (3.11, >=3.10).")
GPU = typer.Option(None, "--gpu", "-g", metavar="GPU",
                   help="A GPU the image must run on (name, alias, nvidia-smi name, sm_89, 8.9); repeatable.")
DRIVER = typer.Option(None, "--driver", metavar="VERSION", help="Oldest host driver the image must run on.")
CUDA = typer.Option(None, "--cuda", metavar="SPEC", help="CUDA version: 12.1 means 12.1.x; specifiers work too.")
CUDNN = typer.Option(None, "--cudnn", metavar="SPEC", help="cuDNN version or specifier (9, 8.9).")
FLAVOUR = typer.Option(None, "--flavour", metavar="FLAVOUR", help="auto | slim | runtime | devel.")
FORWARD = typer.Option(False, "--allow-forward-compat",
                       help="Allow CUDA forward compatibility (cuda-compat; datacenter GPUs only).")
EOL = typer.Option(False, "--refuse-eol-images",
                   help="Refuse end-of-life nvidia/cuda tags (used with a warning otherwise; deleted tags never).")


def _spec(directory: Path, with_: list[str] | None, **flags):
    from ..knowledge.values import flag_values
    from ..project.spec import SPEC_FILE, load_spec, spec_from_flags

    values = flag_values(python=flags["python"], cuda=flags["cuda"], cudnn=flags["cudnn"], driver=flags["driver"],
                         flavour_=flags["flavour"])
    if flags["gpu"]:
        values["gpus"] = tuple(flags["gpu"])
    if flags["forward"]:
        values["allow_forward_compat"] = True
    if flags.get("refuse_eol"):
        values["refuse_eol_images"] = True
    if with_ or (flags.get("plain") and values.get("cuda") and not (Path(directory) / SPEC_FILE).exists()):
        # rule 10: `resolve --cuda 12.8 --gpu "RTX 5090"` with no cudabox.yaml is a plain CUDA stack from flags
        return spec_from_flags(directory, list(with_ or ()), **values)
    return replace(load_spec(directory, has_with=with_ is not None), **values)  # lock has no --with


def _resolution(directory, with_, no_host, **flags):
    from ..lock.resolution import resolve_project

    spec = _spec(directory, with_, **flags)
    return resolve_project(spec, no_host=no_host)


@app.command()
def resolve(with_: list[str] = WITH, python: str = PYTHON, gpu: list[str] = GPU, driver: str = DRIVER,
            cuda: str = CUDA, cudnn: str = CUDNN, flavour: str = FLAVOUR, allow_forward_compat: bool = FORWARD,
            refuse_eol_images: bool = EOL, no_host: bool = NO_HOST, json: bool = JSON,
            project: Path = DIRECTORY):
    """Pick the stack for a project and say why (exit 3 with the reasons when none exists)."""
    output.use_json(json)
    res = _resolution(project, with_ or [], no_host, python=python, gpu=gpu, driver=driver, cuda=cuda,
                      cudnn=cudnn, flavour=flavour, forward=allow_forward_compat, refuse_eol=refuse_eol_images,
                      plain=True)
    stack = res.stack
    if json:
        data = stack.to_dict()
        data["stack_hash"] = stack.hash
        data["other_requirements"] = list(res.others)
        output.emit_json(data)
        return
    print_stack(stack, res.others)


def print_stack(stack, others=()) -> None:
    from rich.markup import escape
    from rich.table import Table

    con = output.console()
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows = [("Python", f"{stack.python} ({stack.python_install})"), ("CUDA", stack.cuda),
            ("cuDNN", stack.cudnn or "—"), ("flavour", stack.flavour), ("base image", stack.base_image)]
    for name, version in stack.packages.items():
        rows.append(("package", f"{name}=={version}"))
    for req in others:
        rows.append(("package", f"{req} (project)"))
    for url in stack.index_urls:
        rows.append(("index", url))
    rows += [("requires", stack.requirement), ("min driver", f"{stack.min_driver or '—'} ({stack.driver_mode})"),
             ("stack", stack.hash[:12])]
    for key, value in rows:  # escaped: `ray[cgraph]` is an extra, not rich markup
        table.add_row(key, escape(str(value)))
    con.print(table)
    con.print("[bold]Why[/]")
    for line in stack.why:
        con.print(f"  • {escape(line)}")
    for line in stack.warnings:
        con.print(f"  [yellow]! {escape(line)}[/]")


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
    spec = _spec(project, None, python=python, gpu=gpu, driver=driver, cuda=cuda, cudnn=cudnn, flavour=flavour,
                 forward=allow_forward_compat, refuse_eol=refuse_eol_images)
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
