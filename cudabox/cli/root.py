"""The `cudabox` Typer app every command module adds its commands to (kept apart so they need not import
the package that imports them)."""

from __future__ import annotations

import typer

from .. import __version__

app = typer.Typer(
    name="cudabox",
    help="One isolated, validated CUDA stack per project, in a container.",
    epilog="Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 unsatisfiable request, "
           "4 passed without a GPU (validate), 5 missing engine or runtime. Reference: docs/.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: fast start-up (no rich import for --help)
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool):
    if value:
        print(f"cudabox {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
):
    """One isolated, validated CUDA stack per project, in a container."""
