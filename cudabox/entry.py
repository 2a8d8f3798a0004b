"""Console-script entry point: answers `--version` before importing the command tree."""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        from . import __version__

        print(f"cudabox {__version__}")
        return 0
    from .cli import main as cli_main

    return cli_main()
