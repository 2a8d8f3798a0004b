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
import json
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


_BACKEND = '''"""A PEP 517 backend with no build requirements: writes the wheel with zipfile (no index is asked)."""
import base64, hashlib, os, zipfile
NAME, VERSION, REQUIRES = {name!r}, {version!r}, {requires!r}
def _record(files, info):
    rows = [f"{{p}},sha256={{base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()}},{{len(d)}}"
            for p, d in files.items()]
    return ("\\n".join(rows + [f"{{info}}/RECORD,,"]) + "\\n").encode()
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist = NAME.replace("-", "_")
    info = f"{{dist}}-{{VERSION}}.dist-info"
    meta = [f"Metadata-Version: 2.1", f"Name: {{NAME}}", f"Version: {{VERSION}}"] + [f"Requires-Dist: {{r}}" for r in REQUIRES]
    files = {{f"{{dist}}/__init__.py": open("module.py", "rb").read(),
             f"{{info}}/METADATA": ("\\n".join(meta) + "\\n").encode(),
             f"{{info}}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: cudabox-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}}
    files[f"{{info}}/RECORD"] = _record(files, info)
    name = f"{{dist}}-{{VERSION}}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return name
'''


class GitPackage:
    """A package in a git repository, served over git's dumb HTTP protocol by `Index.serve` (the repository
    sits under the index's directory): `commit(text)` makes `WHO = text` the tip of `main`. Its build
    backend is in the tree and needs nothing from an index, so a build without network can build it."""

    def __init__(self, index: Index, name: str, version: str = "1.0", requires=()):
        import subprocess

        self.index, self.name = index, name
        self.work = index.root / "git-work" / name
        self.bare = index.root / "git" / f"{name}.git"
        self.work.mkdir(parents=True)
        (self.work / "pyproject.toml").write_text(
            '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
            f'[project]\nname = "{name}"\nversion = "{version}"\n'
            f'dependencies = [{", ".join(json.dumps(r) for r in requires)}]\n')
        (self.work / "backend.py").write_text(_BACKEND.format(name=name, version=version, requires=list(requires)))
        self._git = lambda *args, cwd=self.work: subprocess.run(
            ["git", "-c", "user.email=tests@cudabox", "-c", "user.name=tests", *args], cwd=cwd, check=True,
            capture_output=True, text=True).stdout.strip()
        self._git("init", "-q", "-b", "main", ".")
        self.bare.parent.mkdir(parents=True, exist_ok=True)

    def commit(self, who: str) -> str:
        """Commit `WHO = who` on main, publish it; returns the commit id."""
        (self.work / "module.py").write_text(f"WHO = {who!r}\n")
        self._git("add", ".")
        self._git("commit", "-q", "-m", who)
        if not self.bare.exists():
            self._git("clone", "-q", "--bare", str(self.work), str(self.bare), cwd=self.work.parent)
        else:
            self._git("push", "-q", str(self.bare), "main")
        self._git("update-server-info", cwd=self.bare)  # what the dumb HTTP protocol reads
        return self._git("rev-parse", "HEAD")

    @property
    def url(self) -> str:
        """git+http://... while the index is served."""
        return "git+" + self.index.url.removesuffix("/simple") + f"/git/{self.name}.git"
