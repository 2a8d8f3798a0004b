"""Options declared as data, with a parser for the plain cases that needs no typer.

Why: importing typer and building a click command costs ~20 ms, a fifth of `cudabox resolve --json`.
typer builds these options from the table (cli/options.py), so names, defaults and help texts are written
once; entry.py runs a plain `cudabox resolve` with this parser (cli.plain). Anything else (`--help`, an
unknown or malformed flag, a value that starts with "-") goes to typer, which parses it and says what is
wrong.
tests/test_cli_plain.py checks that every argv this parser accepts means the same to click.
"""

from __future__ import annotations

from pathlib import Path


class Flag:
    """One option: its parameter, names, help text, metavar; a default of False makes it a switch."""

    __slots__ = ("dest", "names", "help", "metavar", "default", "many")

    def __init__(self, dest: str, names: tuple[str, ...], help: str, metavar: str | None = None,  # noqa: A002
                 default: object = None, many: bool = False):
        self.dest, self.names, self.help, self.metavar = dest, names, help, metavar
        self.default, self.many = default, many  # many: repeatable, a list of values

    @property
    def switch(self) -> bool:
        return self.default is False


JSON = Flag("json", ("--json",), "Print one JSON object for scripts (messages and progress go to stderr).",
            default=False)
PROJECT = Flag("project", ("--project", "-C"),
               "Project directory (cudabox.yaml, cudabox.lock, and its .cudabox/matrices overlay).", "DIR",
               default=Path("."))
NO_HOST = Flag("no_host", ("--no-host",), "Ignore this host's driver and GPUs (also CUDABOX_NO_HOST=1).",
               default=False)

WITH = Flag("with_", ("--with", "-w"), "A requirement (PEP 508), repeatable. Without it, ./cudabox.yaml is read.",
            "REQ", many=True)
PYTHON = Flag("python", ("--python",), "Python version or specifier (3.11, >=3.10).", "SPEC")
GPU = Flag("gpu", ("--gpu", "-g"),
           "A GPU the image must run on (name, alias, nvidia-smi name, sm_89, 8.9); repeatable.", "GPU", many=True)
DRIVER = Flag("driver", ("--driver",), "Oldest host driver the image must run on.", "VERSION")
CUDA = Flag("cuda", ("--cuda",), "CUDA version: 12.1 means 12.1.x; specifiers work too.", "SPEC")
CUDNN = Flag("cudnn", ("--cudnn",), "cuDNN version or specifier (9, 8.9).", "SPEC")
FLAVOUR = Flag("flavour", ("--flavour",), "auto | slim | runtime | devel.", "FLAVOUR")
FORWARD = Flag("allow_forward_compat", ("--allow-forward-compat",),
               "Allow CUDA forward compatibility (cuda-compat; datacenter GPUs only).", default=False)
EOL = Flag("refuse_eol_images", ("--refuse-eol-images",),
           "Refuse end-of-life nvidia/cuda tags (used with a warning otherwise; deleted tags never).", default=False)

# `cudabox resolve`'s options, in its --help order.
RESOLVE = (WITH, PYTHON, GPU, DRIVER, CUDA, CUDNN, FLAVOUR, FORWARD, EOL, NO_HOST, JSON, PROJECT)


def parse(flags: tuple[Flag, ...], argv: list[str]) -> dict | None:
    """argv's values by parameter, as click would give them; None when argv is not plain flags."""
    by_name = {name: flag for flag in flags for name in flag.names}
    values = {flag.dest: [] if flag.many else flag.default for flag in flags}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        flag = by_name.get(name)
        if flag is None:
            return None
        if flag.switch:
            if eq:
                return None
            values[flag.dest] = True
            continue
        if not eq:
            value = next(args, None)
            if value is None or value.startswith("-"):
                return None
        if isinstance(flag.default, Path):
            value = Path(value)
        if flag.many:
            values[flag.dest].append(value)
        else:
            values[flag.dest] = value  # given twice, the last wins (click's rule)
    return values
