"""What `cudabox resolve` does, without typer: entry.py runs a plain `cudabox resolve` from here
(cli.plain), and the typer command (cli/resolve.py) calls the same function; `lock` and `run` share the
spec and the stack's table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import output


def spec(directory: Path, with_: list[str] | None, **flags):
    """The project's spec with the flags over it (`lock` has no --with; `resolve --with` reads no cudabox.yaml)."""
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


def resolution(directory, with_, no_host, **flags):
    from ..lock.resolution import resolve_project

    return resolve_project(spec(directory, with_, **flags), no_host=no_host)


def resolve(with_, python, gpu, driver, cuda, cudnn, flavour, allow_forward_compat, refuse_eol_images, no_host,
            json, project) -> None:
    """`cudabox resolve`, its options parsed (cli/flags.RESOLVE): print the stack, or raise with the reasons."""
    output.use_json(json)
    res = resolution(project, with_ or [], no_host, python=python, gpu=gpu, driver=driver, cuda=cuda,
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
    """The stack as a table for people, then why it was picked and its warnings."""
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
