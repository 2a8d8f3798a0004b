"""The `cudabox` Typer app every command module adds its commands to (kept apart so they need not import
the package that imports them), and the group that imports a command's module only when it is asked for."""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperGroup

from .. import __version__
from .commands import EPILOG, MODULES, NAMES, ROOT_HELP


class LazyGroup(TyperGroup):
    """The top-level group: commands listed from the table (commands.py), each module imported when its
    command runs, is completed or is listed in the full help. `cudabox run` imports cli/run.py only."""

    def list_commands(self, ctx) -> list[str]:
        return list(NAMES)

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in MODULES:
            command = load(cmd_name)
            if command is not None:
                self.commands[cmd_name] = command
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:  # click's UsageError: a typo is matched against every command, loaded or not
            message = getattr(exc, "message", None)
            if args and isinstance(message, str) and message.startswith("No such command"):
                from difflib import get_close_matches

                matches = get_close_matches(args[0], NAMES)
                base = message.split(" Did you mean")[0].rstrip(".")
                exc.message = base + (f". Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ".")
            raise


def load(name: str):
    """Import the modules that define command `name` (they register on `app`); its click command, or None."""
    for module in MODULES[name]:
        importlib.import_module(f"{__package__}.{module}")
    from typer.main import get_command, get_command_name

    shadow = typer.Typer(rich_markup_mode=None, add_completion=False)  # converts only this one command
    shadow.registered_commands = [c for c in app.registered_commands
                                  if (c.name or get_command_name(c.callback.__name__)) == name]
    shadow.registered_groups = [g for g in app.registered_groups if g.name == name]
    shadow.callback()(_root)
    return get_command(shadow).commands.get(name)


def load_all() -> None:
    """Import every command module (the full help, the command reference, tests)."""
    for name in NAMES:
        for module in MODULES[name]:
            importlib.import_module(f"{__package__}.{module}")


app = typer.Typer(
    name="cudabox",
    cls=LazyGroup,
    help=ROOT_HELP,
    epilog=EPILOG,
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

