"""The `cudabox` command line: parses, calls the library, prints.

Each command group lives in its own module, imported only when its command runs (root.LazyGroup, from
the table in commands.py), and imports heavy libraries (docker, jinja2) inside the command functions, so
`cudabox CMD` pays for CMD alone; `cudabox --help` is printed from the table (entry.py).
"""

from __future__ import annotations

import os
import sys

from . import output


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the app and turns every failure into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    import typer  # here, not at the top: commands.py (the help's table) is imported without it

    from .root import app

    try:  # typer >= 0.20 vendors click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer depends on click itself
        from click import exceptions as click

    from .. import interrupt

    interrupt.reset()  # the signal handlers are the entry point's (entry.py): a library caller keeps its own
    try:
        rc = app(args=args, prog_name="cudabox", standalone_mode=False)
        if rc == 130 and interrupt.raised():  # typer turned the interrupt into a silent Exit(130)
            return _interrupted(interrupt.raised(), args)
        return rc if isinstance(rc, int) else 0  # typer.Exit(n) comes back as a return value here
    except typer.Exit as exc:
        return getattr(exc, "exit_code", 0)
    except (typer.Abort, KeyboardInterrupt) as exc:
        return _interrupted(interrupt.find(exc), args)
    except click.NoArgsIsHelpError as exc:
        exc.show()
        return 0
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "cudabox"
        output.error(f"{exc.format_message()} (see `{where} --help`)", where=where)
        return 2
    except click.ClickException as exc:
        output.error(exc.format_message())
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        return failed(exc, args)


def plain(args: list[str]) -> int | None:
    """A plain `cudabox resolve` (only flags from cli/flags.RESOLVE), run without typer (cli/flags.py says
    why); None when typer must parse args. Ends like `main`: output, or one line and the exit code."""
    from . import flags

    values = flags.parse(flags.RESOLVE, args[1:]) if args[:1] == ["resolve"] else None
    if values is None:
        return None
    from .. import interrupt

    interrupt.reset()
    try:
        from .resolving import resolve

        resolve(**values)
        return 0
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("cudabox"):
            return None  # a dependency is missing: entry.py says which, as for any command
        return failed(exc, args)
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - as in main
        return failed(exc, args)


def failed(exc: BaseException, args: list[str]) -> int:
    """A command's failure as one line and its exit code: an interrupt, a CudaboxError, else exit 70."""
    from .. import interrupt
    from ..errors import CudaboxError

    if isinstance(exc, KeyboardInterrupt):
        return _interrupted(interrupt.find(exc), args)
    if isinstance(exc, CudaboxError):
        output.report_error(exc)
        return exc.exit_code
    if os.environ.get("CUDABOX_DEBUG"):
        raise exc
    output.error(f"internal error: {type(exc).__name__}: {exc} (set CUDABOX_DEBUG=1 for a traceback)")
    return 70


# What an interrupted command leaves behind, said in its one line.
_AFTER = {"build": "the builder was stopped, nothing was tagged, secret files removed",
          "validate": "the smoke-test container was removed", "lock": "cudabox.lock was not changed",
          "init": "no file was half-written", "run": "no job was left behind",
          "ci": "builders stopped, nothing was tagged"}


def _interrupted(exc, args: list[str]) -> int:
    """One line saying what was interrupted; exit 128 + the signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    from ..interrupt import Interrupted

    command = next((a for a in args if not a.startswith("-")), "")
    name = exc.name if isinstance(exc, Interrupted) else "Ctrl-C" if exc is not None else "aborted"
    after = _AFTER.get(command)
    output.error(f"`cudabox {command}` interrupted ({name})" + (f"; {after}" if after else "")
                 if command else f"interrupted ({name})")
    return exc.exit_code if isinstance(exc, Interrupted) else 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
