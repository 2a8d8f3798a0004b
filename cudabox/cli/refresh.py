"""`cudabox matrix refresh`: learn new framework releases from PyPI (docs/refresh.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .matrix import matrix_app
from .options import PROJECT


@matrix_app.command("refresh")
def refresh(
    framework: list[str] = typer.Option(
        None, "--framework", "-f", metavar="NAME",
        help="Only this one: a framework of matrices/frameworks.yaml that refresh can read, a companion, "
             "cudnn or cuda (repeatable; default: all)."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Show the diff, write nothing."),
    into: Path = typer.Option(
        None, "--into", metavar="DIR",
        help="Write into DIR instead of the user overlay ($XDG_CONFIG_HOME/cudabox/matrices); "
             "maintainers: --into matrices/."),
    ca_cert: Path = typer.Option(
        None, "--ca-cert", metavar="PEM", help="Trust this CA bundle for HTTPS (default: $CUDABOX_CA_CERT, "
                                               "else $SSL_CERT_FILE, else the system store)."),
    offline: bool = typer.Option(False, "--offline", help="Use only the cache from earlier runs; no network."),
    json: bool = typer.Option(False, "--json", help="Print the diff as JSON for scripts."),
    project: Path = PROJECT,
):
    """Read PyPI (releases, pins, Requires-Python) and add what the matrix lacks; prints the diff first."""
    from ..knowledge.pypi import Client, HTTPTransport
    from ..knowledge.refresh.write import as_json, run, target_dir

    output.use_json(json)
    chosen = list(framework) if framework else None
    client = Client(HTTPTransport(ca_cert=str(ca_cert) if ca_cert else None), offline=offline)
    try:
        with _progress() as progress:
            plan, lines, written = run(client, chosen, into=into, project_dir=project, dry_run=dry_run,
                                       progress=progress)
    finally:
        client.close()
    if json:
        data = as_json(plan)
        data.update(dry_run=dry_run, into=str(target_dir(into)), written=[str(p) for p in written])
        output.emit_json(data)
        return
    for line in lines:
        print(line)
    inferred = sum(1 for c in plan.changes if _inferred(c.new))
    if not plan.changes:
        print("matrix refresh: the matrix already has everything PyPI lists")
    elif dry_run:
        print(f"matrix refresh: {len(plan.changes)} record(s) would change in {target_dir(into)} (--dry-run: "
              "nothing written)")
    else:
        print(f"matrix refresh: wrote {len(plan.changes)} record(s) to "
              + ", ".join(str(p) for p in written)
              + (f"; {inferred} carry inferred facts (`cudabox matrix check` lists them)" if inferred else ""))


def _inferred(value) -> bool:
    if isinstance(value, dict):
        return value.get("status") == "inferred" or any(_inferred(v) for v in value.values())
    return isinstance(value, list) and any(_inferred(v) for v in value)


class _progress:
    """A one-line status on stderr while PyPI is read (nothing when stderr is not a terminal)."""

    def __enter__(self):
        import sys

        self.status = None
        if sys.stderr.isatty():
            self.status = output.console(stderr=True).status("reading PyPI")
            self.status.start()
        return self.update

    def update(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)

    def __exit__(self, *exc):
        if self.status is not None:
            self.status.stop()
        return False
