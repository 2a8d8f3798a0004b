"""Printing for people (rich) and for scripts (--json), and errors as one line.

Commands call `output.use_json(flag)` first; from then on errors are printed
the way the caller asked for: a JSON object on stdout, or one line on stderr.
"""

from __future__ import annotations

import json
import sys

_state = {"json": False}


def use_json(flag: bool) -> None:
    _state["json"] = bool(flag)


def json_mode() -> bool:
    return _state["json"]


def console(stderr: bool = False):
    """A rich Console, created on first use (rich is not imported for --help)."""
    from rich.console import Console

    key = "err" if stderr else "out"
    if key not in _state:
        _state[key] = Console(stderr=stderr, highlight=False, soft_wrap=True)
    return _state[key]


def emit_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def error(message: str, *, where: str = "cudabox") -> None:
    from ..errors import one_line

    message = one_line(message)
    if _state["json"]:
        emit_json({"error": message})
        return
    sys.stderr.write(f"{where}: error: {message}\n")


def report_error(exc) -> None:
    """Print a CudaboxError: one line, plus the reasons of an Unsatisfiable request."""
    from ..errors import one_line

    reasons = getattr(exc, "reasons", None)
    reasons = None if reasons is None else [one_line(r) for r in reasons]
    if _state["json"]:
        obj = {"error": one_line(str(exc)), "exit_code": exc.exit_code}
        if reasons is not None:
            obj["reasons"] = reasons
        emit_json(obj)
        return
    sys.stderr.write(f"cudabox: error: {one_line(str(exc))}\n")
    wrap = exc.exit_code == 3  # an unsatisfiable request's reasons are prose: wrap them (rule 9); log lines are not
    for reason in reasons or ():
        sys.stderr.write(wrapped(reason) if wrap else f"  - {reason}\n")


def wrapped(reason: str) -> str:
    """One reason as a bullet wrapped into short lines: the terminal's width, else 100 columns."""
    import shutil
    import textwrap

    width = shutil.get_terminal_size((100, 24)).columns if sys.stderr.isatty() else 100
    return textwrap.fill(reason, width=max(60, min(width, 120)), initial_indent="  - ", subsequent_indent="    ",
                         break_long_words=False, break_on_hyphens=False) + "\n"
