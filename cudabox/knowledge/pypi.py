"""A small PyPI client on the standard library: project JSON and the METADATA of one wheel.

`cudabox matrix refresh` reads PyPI on a user's machine, behind whatever proxy
and CA bundle they have, so it is polite and robust: timeouts, retries with
exponential backoff on 5xx/429/connection errors, conditional requests
(ETag / Last-Modified) backed by a cache in the user cache dir, proxies from
the environment, TLS trust from --ca-cert or SSL_CERT_FILE, kept-alive
connections (knowledge/transport.py). An unreachable network is one
`EnvironmentProblem` line.

Everything goes through a `Transport` (`get(url, headers) -> Response`), so the
tests replay recorded responses with `FixtureTransport` instead of the network.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import EnvironmentProblem, InputError
from ..files import write_atomic
from . import lazywheel
from .transport import HTTPTransport, Response, Unreachable, ssl_context

__all__ = ["PYPI", "Client", "FixtureTransport", "HTTPTransport", "Metadata", "Response", "Unreachable",
           "ssl_context", "unreachable"]

PYPI = "https://pypi.org"


def unreachable(exc: Unreachable) -> EnvironmentProblem:
    """The one line a user sees when the network is down, filtered, or TLS is intercepted."""
    problem = EnvironmentProblem(f"cannot reach {exc.url}: {exc.reason}; check the network/proxy, or pass --ca-cert")
    problem.reason = exc.reason
    return problem


class FixtureTransport:
    """Replays recorded responses from a directory (tests/fixtures/pypi): no network at all.

    `https://pypi.org/pypi/NAME/json` -> `NAME.json`; a wheel's `….whl.metadata` ->
    `metadata/<wheel file name>.metadata`; the PyTorch index's simple pages
    `https://download.pytorch.org/whl/NAME/` -> `pytorch-index/NAME.html` (`/whl/cu117/torch/` ->
    `pytorch-index/cu117/torch.html`); anything else is a 404.
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.requests: list[str] = []

    def path_for(self, url: str) -> Path | None:
        parsed = urllib.parse.urlparse(url)
        m = re.fullmatch(r"/pypi/([^/]+)/json", parsed.path)
        if m:
            return self.directory / f"{m.group(1).lower()}.json"
        if parsed.path.endswith(".whl.metadata"):
            return self.directory / "metadata" / parsed.path.rsplit("/", 1)[1]
        m = re.fullmatch(r"/whl/((?:[^/]+/)*[^/]+)/", parsed.path)  # /whl/torch/, /whl/cu117/torch/
        if parsed.netloc == "download.pytorch.org" and m and ".." not in m.group(1).split("/"):
            return self.directory / "pytorch-index" / f"{m.group(1).lower()}.html"
        return None

    def get(self, url: str, headers: dict | None = None, *, quick: bool = False) -> Response:
        self.requests.append(url)
        path = self.path_for(url)
        if path is None or not path.is_file():
            return Response(404)
        return Response(200, path.read_bytes(), {"content-type": "application/octet-stream"})


@dataclass
class Metadata:
    """The parts of a wheel's METADATA the matrix needs."""

    url: str  # where it was read (cited as the record's source)
    requires_python: str | None
    requires_dist: list[str]


class Client:
    """PyPI's JSON API plus wheel METADATA, with an on-disk cache.

    Project JSON is revalidated with If-None-Match / If-Modified-Since; wheel
    METADATA never changes once uploaded, so it is cached for good. `offline`
    answers from the cache only.
    """

    def __init__(self, transport=None, *, cache_dir: Path | None = None, offline: bool = False,
                 index: str = PYPI):
        self.transport = transport or HTTPTransport()
        self.cache = Path(cache_dir) if cache_dir else paths.cache_dir() / "pypi"
        self.offline, self.index = offline, index.rstrip("/")

    def close(self) -> None:
        """Close the transport's kept-alive connections (a FixtureTransport has none)."""
        close = getattr(self.transport, "close", None)
        if close is not None:
            close()

    # ---------------------------------------------------------------- cache

    def _slot(self, url: str) -> Path:
        return self.cache / hashlib.sha256(url.encode()).hexdigest()[:32]

    def _cached(self, url: str):
        slot = self._slot(url)
        try:
            meta = json.loads(slot.with_suffix(".json").read_text(encoding="utf-8"))
            return meta, slot.with_suffix(".body").read_bytes()
        except (OSError, ValueError):
            return None, None

    def _store(self, url: str, response: Response) -> None:
        slot = self._slot(url)
        try:
            write_atomic(slot.with_suffix(".body"), response.body)
            write_atomic(slot.with_suffix(".json"), json.dumps({
                "url": url, "etag": response.header("etag"), "last_modified": response.header("last-modified"),
                "fetched": time.time()}))
        except OSError:  # a read-only cache must not break a refresh
            pass

    def fetch(self, url: str, *, revalidate: bool = True, quick: bool = False) -> bytes | None:
        """The body of `url` (None on 404), from the cache when it is still valid."""
        meta, body = self._cached(url)
        if body is not None and (self.offline or not revalidate):
            return body
        if self.offline:
            raise EnvironmentProblem(f"--offline: no cached copy of {url}", hint="run once without --offline")
        headers = {}
        if meta and meta.get("etag"):
            headers["If-None-Match"] = meta["etag"]
        if meta and meta.get("last_modified"):
            headers["If-Modified-Since"] = meta["last_modified"]
        try:
            response = self.transport.get(url, headers if body is not None else {}, quick=quick)
        except Unreachable as exc:
            raise unreachable(exc) from None
        if response.status == 304 and body is not None:
            return body
        if response.status == 404:
            return None
        if response.status not in (200, 203):
            raise EnvironmentProblem(f"{url}: HTTP {response.status}", hint="PyPI may be having trouble; retry later")
        self._store(url, response)
        return response.body

    def get_json(self, url: str):
        body = self.fetch(url)
        if body is None:
            return None
        try:
            return json.loads(body)
        except ValueError:
            raise EnvironmentProblem(f"{url}: not JSON (a captive portal or proxy page?)") from None

    # ---------------------------------------------------------------- PyPI

    def project_url(self, name: str) -> str:
        return f"{self.index}/pypi/{name}/json"

    def project(self, name: str) -> dict:
        """/pypi/NAME/json; an unknown project is an InputError."""
        data = self.get_json(self.project_url(name))
        if data is None:
            raise InputError(f"PyPI has no project named {name!r}")
        return data

    def file_url(self, name: str, file: dict) -> str:
        """Files' URLs may be relative to the JSON document (mirrors); make them absolute."""
        return urllib.parse.urljoin(self.project_url(name), file["url"])

    def metadata(self, name: str, version: str, file: dict) -> Metadata:
        """The wheel's own METADATA: PEP 658 `.metadata`, else ranges of the wheel, else /pypi/NAME/VERSION/json.

        The source cited is the wheel's URL: it is that file's metadata however it was read.
        """
        url = self.file_url(name, file)
        text = next((body for key in (url + ".metadata", url + "#METADATA") for body in [self._cached(key)[1]]
                     if body is not None), None)
        if text is None and not self.offline:
            text = self.fetch(url + ".metadata", revalidate=False)
            if text is None:
                text = self._metadata_from_wheel(url, file.get("size"))
        if text is not None:
            msg = email.parser.HeaderParser().parsestr(text.decode("utf-8", "replace"))
            return Metadata(url, msg.get("Requires-Python"), list(msg.get_all("Requires-Dist") or []))
        release_url = f"{self.index}/pypi/{name}/{version}/json"
        data = self.get_json(release_url)
        if data is None:
            raise EnvironmentProblem(f"cannot read the metadata of {file['filename']} ({url})")
        info = data.get("info") or {}
        return Metadata(release_url, info.get("requires_python") or None, list(info.get("requires_dist") or []))

    def _metadata_from_wheel(self, url: str, size: int | None) -> bytes | None:
        """Read only METADATA out of a remote wheel with HTTP range requests (knowledge/lazywheel.py)."""

        def fetch(start: int, end: int) -> bytes:
            response = self.transport.get(url, {"Range": f"bytes={start}-{end - 1}"})
            if response.status != 206:
                raise lazywheel.NoRanges(url)
            return response.body

        try:
            if not size:  # the JSON API gives sizes; a mirror that doesn't: the server says in Content-Range
                probe = self.transport.get(url, {"Range": "bytes=0-0"})
                match = re.search(r"/(\d+)$", probe.header("content-range") or "") if probe.status == 206 else None
                if not match:
                    return None
                size = int(match.group(1))
            text = lazywheel.metadata(lazywheel.RemoteFile(fetch, size))
        except Unreachable as exc:
            raise unreachable(exc) from None
        except lazywheel.NoRanges:
            return None
        if text is not None:
            self._store(url + "#METADATA", Response(200, text))
        return text
