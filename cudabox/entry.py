"""Console-script and `python -m cudabox` entry point: answers `--version` and `--help` before importing the
command tree (the help from the table in cli/commands.py), and runs `check` without typer when cudabox's
dependencies are not installed (a bare GPU node)."""

from __future__ import annotations

import gc
import os
import sys


def main(argv: list[str] | None = None) -> int:
    from .interrupt import install, settled

    install()  # first: a SIGTERM during the imports below exits 143 like one later, not by the signal
    # A short-lived process that allocates much and frees little (imports, the unpickled matrix): collect
    # the young generation every 50,000 allocations instead of 700 (~10 ms of every command).
    gc.set_threshold(50_000, 10, 10)
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from . import __version__

        print(f"cudabox {__version__}")
        return 0
    if args in ([], ["--help"], ["-h"]) and "_CUDABOX_COMPLETE" not in os.environ:
        from .cli.commands import root_help  # the standard library only: no typer for the command list

        # like click: asked for, the help goes to stdout; for a bare `cudabox`, to stderr (exit 0 both)
        (sys.stdout if args else sys.stderr).write(root_help())
        return 0
    try:
        from .cli import main as cli_main, plain

        # a plain `resolve` runs without typer (cli/flags.py says why); plain() runs it or answers None
        rc = plain(args) if "_CUDABOX_COMPLETE" not in os.environ else None
        if rc is None:
            import typer  # noqa: F401 - the command tree's (cli/ imports it inside main): without it, only `check` runs
    except ImportError as exc:  # typer, rich... missing: only `check` can run
        if args[:1] == ["check"]:
            return plain_check(args[1:])
        sys.stderr.write(f"cudabox: error: {exc.name or exc} is not installed: only `cudabox check` runs "
                         "without cudabox's dependencies (pip install cudabox)\n")
        return 2
    except KeyboardInterrupt as exc:  # a signal while starting up: nothing to clean yet
        sys.stderr.write(f"cudabox: error: interrupted ({getattr(exc, 'name', 'SIGINT')}) while starting\n")
        return getattr(exc, "exit_code", 130)
    if rc is None:
        rc = cli_main(args)
    settled()  # done: the exit code stands, whatever arrives from now on
    gc.freeze()  # what is left is freed at exit without the collector walking it first (~10 ms: the matrix)
    return rc


def plain_parser():
    """`cudabox check`'s options for argparse: the same names and help texts as the typer command."""
    import argparse

    from .jobs import nodecheck

    h = nodecheck.HELP
    parser = argparse.ArgumentParser(prog="cudabox check", description="Is this GPU node healthy? (docs/check.md)")
    parser.add_argument("--level", default="2", metavar="1|2|3", help=h["level"])
    parser.add_argument("--python", metavar="PATH", help=h["python"])
    parser.add_argument("--lock", action="store_true", help=h["lock"])
    parser.add_argument("--project", "-C", default=".", metavar="DIR", help=h["project"])
    parser.add_argument("--device", type=int, metavar="N", help=h["device"])
    parser.add_argument("--gpus", type=int, metavar="N", help=h["gpus"])
    parser.add_argument("--duration", type=float, default=30.0, metavar="SECONDS", help=h["duration"])
    parser.add_argument("--gemm-size", type=int, metavar="N", help=h["gemm_size"])
    parser.add_argument("--target", action="append", default=[], metavar="sm_XY", help=h["target"])
    parser.add_argument("--results-dir", metavar="DIR", help=h["results_dir"])
    parser.add_argument("--no-save", action="store_true", help=h["no_save"])
    parser.add_argument("--json", action="store_true", help=h["json"])
    return parser


def plain_check(argv: list[str]) -> int:
    """`cudabox check` without typer (a bare GPU node)."""
    import json

    from .errors import CudaboxError, InputError
    from .jobs import nodecheck

    a = plain_parser().parse_args(argv)  # exits 2 on bad usage
    try:
        if (a.device is not None and a.device < 0) or (a.gpus is not None and a.gpus < 0) or a.duration < 1 \
                or (a.gemm_size is not None and a.gemm_size < 16):
            raise InputError("--device/--gpus >= 0, --duration >= 1, --gemm-size >= 16")
        from pathlib import Path

        options = nodecheck.Options(level=nodecheck.parse_level(a.level), python=a.python, lock=a.lock,
                                    project=Path(a.project), device=a.device, gpus=a.gpus, duration=a.duration,
                                    gemm_size=a.gemm_size, targets=tuple(a.target),
                                    results_dir=Path(a.results_dir) if a.results_dir else None, save=not a.no_save)
        report = nodecheck.check(options)
    except CudaboxError as exc:
        if a.json:
            print(json.dumps({"error": str(exc), "exit_code": exc.exit_code}))
        sys.stderr.write(f"cudabox: error: {exc}\n")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - never a traceback, as in cudabox.cli.main
        if os.environ.get("CUDABOX_DEBUG"):
            raise
        sys.stderr.write(f"cudabox: error: internal error: {type(exc).__name__}: {exc} (CUDABOX_DEBUG=1 for a traceback)\n")
        return 70
    from .jobs.noderesults import format_text

    print(json.dumps(report, indent=2) if a.json else format_text(report))
    return report["exit_code"]
