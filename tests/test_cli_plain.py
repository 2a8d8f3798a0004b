"""A plain `cudabox resolve` runs without typer (cli/flags.py, cli.plain): it must mean and print exactly
what the typer command does, and hand everything else to typer."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from cudabox.cli import flags

NAMES = [name for flag in flags.RESOLVE for name in flag.names]
VALUES = ["torch", "A100", "3.11", "", "=x", "-x", "--json", "a b", "torch[cuda]>=2", "."]


def click_params(argv: list[str]) -> dict | None:
    """What click (typer's command) parses from argv; None when it refuses."""
    from cudabox.cli.root import load

    command = load("resolve")
    try:
        ctx = command.make_context("resolve", list(argv))
    except Exception:  # click's UsageError / BadParameter, --help's Exit
        return None
    return ctx.params


def normal(values: dict) -> dict:
    """Compare values, not containers: a repeatable flag as a list, a path as text."""
    out = {}
    for flag in flags.RESOLVE:
        value = values[flag.dest]
        out[flag.dest] = list(value or ()) if flag.many else str(Path(value)) if flag.dest == "project" else value
    return out


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.sampled_from(NAMES), st.sampled_from(VALUES),
                          st.builds(lambda n, v: f"{n}={v}", st.sampled_from(NAMES), st.sampled_from(VALUES))),
                max_size=7))
def test_what_the_plain_parser_accepts_click_reads_the_same(argv):
    plain = flags.parse(flags.RESOLVE, argv)
    if plain is None:
        return  # typer parses it (and says what is wrong)
    click = click_params(argv)
    assert click is not None, f"plain accepted {argv} that click refuses"
    assert normal(plain) == normal(click), argv


def test_the_common_forms_are_plain_and_the_rest_goes_to_typer():
    assert flags.parse(flags.RESOLVE, ["--with", "torch", "-w", "jax", "--gpu=A100", "--json", "-C", "p"]) == {
        **flags.parse(flags.RESOLVE, []), "with_": ["torch", "jax"], "gpu": ["A100"], "json": True,
        "project": Path("p")}
    for argv in (["--help"], ["-h"], ["-wtorch"], ["--json=1"], ["--with"], ["--with", "-e"], ["extra"], ["--"],
                 ["--gpus", "A100"]):
        assert flags.parse(flags.RESOLVE, argv) is None, argv


def test_typer_takes_its_options_from_the_table():
    from cudabox.cli.root import load

    command = load("resolve")
    declared = {p.name: p for p in command.params}
    for flag in flags.RESOLVE:
        param = declared[flag.dest]
        assert tuple(param.opts) == flag.names and param.help == flag.help and param.metavar == flag.metavar


def run_both(args: list[str]) -> tuple:
    """(rc, stdout, stderr) of the plain path (cli.plain, as entry.py runs it) and of typer's (cli.main), in
    this process (entry.main itself would leave the signal handlers and mask of a command-line process)."""
    from cudabox import cli

    results = []
    for main in (cli.plain, cli.main):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(args))
        results.append((rc, out.getvalue(), err.getvalue()))
    assert results[0][0] is not None, "not a plain resolve"
    return results


@pytest.mark.parametrize("args, rc", [
    (["resolve", "--with", "torch", "--gpu", "A100", "--json", "--no-host"], 0),
    (["resolve", "--with", "torch==2.3.*", "--with", "jax>=0.4.30", "--json", "--no-host"], 3),
    (["resolve", "--with", "torch==2.3.*", "--with", "jax>=0.4.30", "--no-host"], 3),
    (["resolve", "--with", "torch", "--gpu", "Z999", "--no-host"], 2),
    (["resolve", "--with", "torch", "--python=2.7", "--json", "--no-host"], 3),
    (["resolve", "-C", "/nonexistent/project", "--no-host"], 2),
])
def test_plain_and_typer_print_the_same(args, rc, monkeypatch):
    monkeypatch.setenv("CUDABOX_NO_HOST", "1")
    plain, typer_ = run_both(args)
    assert plain == typer_ and plain[0] == rc, (plain, typer_)
    if "--json" in args:
        json.loads(plain[1])


def test_a_plain_resolve_never_imports_typer(tmp_path):
    code = ("import sys, contextlib, io\nfrom cudabox.entry import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): rc = main({args})\n"
            "print(rc, 'typer' in sys.modules, 'rich' in sys.modules)")
    env = {"CUDABOX_NO_HOST": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    fast = subprocess.run([sys.executable, "-c", code.format(args="['resolve', '-w', 'torch', '--json']")],
                          capture_output=True, text=True, env=env)
    assert fast.stdout.split() == ["0", "False", "False"], fast.stdout + fast.stderr
    slow = subprocess.run([sys.executable, "-c", code.format(args="['resolve', '-wtorch', '--json']")],
                          capture_output=True, text=True, env=env)
    assert slow.stdout.split() == ["0", "True", "False"], slow.stdout + slow.stderr


def test_a_signal_during_a_plain_resolve_ends_as_with_typer(monkeypatch, capsys):
    import signal

    from cudabox import cli, interrupt
    from cudabox.cli import resolving

    def stopped(*args, **kwargs):
        raise interrupt.Interrupted(signal.SIGTERM)

    monkeypatch.setattr(resolving, "resolve", stopped)
    assert cli.plain(["resolve", "--with", "torch"]) == 143
    assert capsys.readouterr().err == "cudabox: error: `cudabox resolve` interrupted (SIGTERM)\n"
