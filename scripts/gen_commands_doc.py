"""Write docs/commands.md from the CLI's own help texts (a test keeps the file in sync).

Usage: .venv/bin/python scripts/gen_commands_doc.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from cudabox.cli.root import app

try:  # typer >= 0.26 vendors click
    from typer._click import Context
except ImportError:  # pragma: no cover
    from click import Context

DOC = Path(__file__).resolve().parent.parent / "docs" / "commands.md"
HEADER = """# Command reference

Generated from the commands' own `--help` by `scripts/gen_commands_doc.py`; do not edit by hand.
Every command takes `-h/--help`. Exit codes: [exit-codes.md](exit-codes.md).
"""


def _walk(command, path, parent=None):
    ctx = Context(command, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100)
    yield " ".join(path), command, ctx
    for name in getattr(command, "list_commands", lambda _ctx: [])(ctx):
        yield from _walk(command.get_command(ctx, name), path + [name], ctx)


def render() -> str:
    root = typer.main.get_command(app)
    parts = [HEADER]
    for path, command, ctx in _walk(root, ["cudabox"]):
        if path == "cudabox":
            continue
        parts.append(f"\n## `{path}`\n\n```\n{command.get_help(ctx).rstrip()}\n```\n")
    return "".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if DOC.read_text() != text:
            print(f"{DOC} is out of date: run scripts/gen_commands_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
