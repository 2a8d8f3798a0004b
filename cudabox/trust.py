"""Which CA bundle cudabox trusts: one rule for `build`, `ci build`, `ci bake` and `matrix refresh`.

TLS-intercepting proxies re-sign HTTPS, so image builds (a build secret, never
a layer) and cudabox's own PyPI client must trust their CA. Everywhere the
order is: --ca-cert, then $CUDABOX_CA_CERT, then `ca_cert:` in cudabox.yaml
(a file inside the project; commands that read one). cudabox's own HTTPS then
falls back to $SSL_CERT_FILE and the system store, as OpenSSL does.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError
from .files import display_path, read_input

CA_ENV = "CUDABOX_CA_CERT"


def ca_bundle(flag=None, *, project_dir: Path | None = None, spec_value: str | None = None,
              spec_where: str = "cudabox.yaml: ca_cert") -> tuple[Path, str] | None:
    """The CA bundle to trust and where that choice came from, or None; a bad file is an InputError."""
    if flag:
        return check_bundle(Path(flag), "--ca-cert")
    if os.environ.get(CA_ENV):
        return check_bundle(Path(os.environ[CA_ENV]), CA_ENV)
    if spec_value:
        return check_bundle(Path(project_dir or ".") / Path(spec_value).expanduser(), spec_where)
    return None


def check_bundle(path: Path, source: str) -> tuple[Path, str]:
    """A readable PEM bundle, resolved; errors name where it came from."""
    try:
        path = path.expanduser().resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise InputError(f"{source}: {display_path(path)}: cannot follow the path (a symlink loop?)") from None
    if not path.exists():
        raise InputError(f"{source}: no such file: {display_path(path)} (cannot read the CA bundle)")
    try:  # bounded: a CA bundle is ~200 KB; --ca-cert /dev/zero must not fill the memory
        head = read_input(path, limit=16 << 20, shown=display_path(path)).decode("utf-8", errors="replace")
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
    if "-----BEGIN CERTIFICATE-----" not in head:
        raise InputError(f"{source}: {display_path(path)}: not a PEM certificate bundle")
    return path, source
