"""Tiny wheels and PEP 503 indexes that tests build themselves (no network, no real packages).

A wheel here is a zip with one module (`<name>/__init__.py` holding its version
and a `WHERE` string naming the index it was published on), METADATA, WHEEL
and RECORD. `Index` lays them out as a simple repository
(`simple/<name>/index.html` linking the files with their sha256), usable as a
file:// URL or served over HTTP (`serve`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import re
import threading
import zipfile
from pathlib import Path


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_wheel(out: Path, name: str, version: str, *, requires=(), python_tag: str = "py3", abi: str = "none",
                platform: str = "any", where: str = "", requires_python: str | None = None) -> Path:
    dist = re.sub(r"[-.]+", "_", name)
    module = dist.lower()
    tag = f"{python_tag}-{abi}-{platform}"
    path = Path(out) / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    meta += [f"Requires-Dist: {r}" for r in requires]
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\nWHERE = {where!r}\n",
        f"{info}/METADATA": "\n".join(meta) + "\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: cudabox-tests\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    for rel, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    Path(out).mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return path


class Index:
    """A PEP 503 simple index in a directory: add wheels, then `url` (file://) or `serve()` (http)."""

    def __init__(self, root: Path, label: str = ""):
        self.root = Path(root)
        self.label = label or self.root.name
        (self.root / "files").mkdir(parents=True, exist_ok=True)
        self.http_url: str | None = None

    def add(self, name: str, version: str, **kw) -> Path:
        kw.setdefault("where", self.label)
        wheel = build_wheel(self.root / "files", name, version, **kw)
        self._write_page(name)
        return wheel

    def _write_page(self, name: str) -> None:
        norm = _norm(name)
        page = self.root / "simple" / norm / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = []
        for wheel in sorted((self.root / "files").glob("*.whl")):
            if _norm(wheel.name.split("-")[0]) == norm:
                sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
                links.append(f'<a href="../../files/{wheel.name}#sha256={sha}">{wheel.name}</a><br/>')
        page.write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
        names = sorted(p.name for p in (self.root / "simple").iterdir() if p.is_dir())
        (self.root / "simple" / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(f'<a href="{n}/">{n}</a><br/>' for n in names)
            + "\n</body></html>\n")

    @property
    def url(self) -> str:
        return self.http_url or (self.root / "simple").as_uri()

    @contextlib.contextmanager
    def serve(self, host: str = "127.0.0.1"):
        """Serve the index over HTTP on `host` (a free port) while the block runs."""
        handler = functools.partial(_Quiet, directory=str(self.root))
        server = http.server.ThreadingHTTPServer((host, 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.http_url = f"http://{host}:{server.server_address[1]}/simple"
        try:
            yield self.http_url
        finally:
            self.http_url = None
            server.shutdown()
            server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
