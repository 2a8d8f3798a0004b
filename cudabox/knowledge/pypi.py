"""A small PyPI client on the standard library: project JSON and the METADATA of one wheel.

`cudabox matrix refresh` reads PyPI on a user's machine, behind whatever proxy
and CA bundle they have, so it is polite and robust: timeouts, retries with
exponential backoff on 5xx/429/connection errors, conditional requests
(ETag / Last-Modified) backed by a cache in the user cache dir, proxies from
the environment (urllib's ProxyHandler), TLS trust from --ca-cert or
SSL_CERT_FILE. An unreachable network is one `EnvironmentProblem` line.

Everything goes through a `Transport` (`get(url, headers) -> Response`), so the
tests replay recorded responses with `FixtureTransport` instead of the network.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..errors import EnvironmentProblem, InputError
from ..files import write_atomic
from ..trust import ca_bundle

PYPI = "https://pypi.org"
USER_AGENT = "cudabox-matrix-refresh (+https://pypi.org/project/cudabox/)"
_RETRY_STATUS = {429, 500, 502, 503, 504}


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict = field(default_factory=dict)  # lower-case names

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Unreachable(Exception):
    """The transport could not talk to the server at all (DNS, TCP, TLS, timeout)."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"{url}: {reason}")
        self.url, self.reason = url, reason


def unreachable(exc: Unreachable) -> EnvironmentProblem:
    """The one line a user sees when the network is down, filtered, or TLS is intercepted."""
    problem = EnvironmentProblem(f"cannot reach {exc.url}: {exc.reason}; check the network/proxy, or pass --ca-cert")
    problem.reason = exc.reason
    return problem


def ssl_context(ca_cert: str | os.PathLike | None = None) -> ssl.SSLContext:
    """Trust trust.ca_bundle's choice (--ca-cert, $CUDABOX_CA_CERT), else $SSL_CERT_FILE, else the system
    store (corporate proxies re-sign TLS)."""
    found = ca_bundle(ca_cert)
    cafile = found[0] if found else os.environ.get("SSL_CERT_FILE") or None
    if cafile and not Path(cafile).is_file():
        raise InputError(f"SSL_CERT_FILE: no such file: {cafile}")
    try:
        return ssl.create_default_context(cafile=str(cafile) if cafile else None)
    except ssl.SSLError as exc:
        raise InputError(f"cannot use CA bundle {cafile}: {exc}") from None


class HTTPTransport:
    """urllib with timeouts and retries; proxies come from the environment (*_proxy, no_proxy)."""

    def __init__(self, *, timeout: float = 15.0, retries: int = 3, backoff: float = 0.5,
                 ca_cert: str | None = None, sleep=time.sleep):
        self.timeout, self.retries, self.backoff, self._sleep = timeout, retries, backoff, sleep
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl_context(ca_cert)))

    def get(self, url: str, headers: dict | None = None, *, quick: bool = False) -> Response:
        """GET `url`; `quick` = one short try (for optional sources such as the PyTorch index)."""
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
        attempts = 1 if quick else 1 + self.retries
        reason = "no attempt"
        for attempt in range(attempts):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            try:
                with self._opener.open(request, timeout=3.0 if quick else self.timeout) as resp:
                    return Response(resp.status, resp.read(), {k.lower(): v for k, v in resp.headers.items()})
            except urllib.error.HTTPError as exc:
                response = Response(exc.code, exc.read() or b"", {k.lower(): v for k, v in exc.headers.items()})
                if exc.code not in _RETRY_STATUS or attempt == attempts - 1:
                    return response
                reason = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
                reason = _reason(exc)
        raise Unreachable(url, reason)


def _reason(exc: Exception) -> str:
    inner = getattr(exc, "reason", None) or exc
    text = str(getattr(inner, "strerror", None) or inner) or type(inner).__name__
    return text if not isinstance(inner, TimeoutError) else "timed out"


class FixtureTransport:
    """Replays recorded responses from a directory (tests/fixtures/pypi): no network at all.

    `https://pypi.org/pypi/NAME/json` -> `NAME.json`; a wheel's `….whl.metadata` ->
    `metadata/<wheel file name>.metadata`; the PyTorch index's simple page
    `https://download.pytorch.org/whl/NAME/` -> `pytorch-index/NAME.html`; anything else is a 404.
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
        m = re.fullmatch(r"/whl/([^/]+)/", parsed.path)
        if parsed.netloc == "download.pytorch.org" and m:
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
        """Read only METADATA out of a remote wheel with HTTP range requests (like pip's lazy wheel)."""
        try:
            remote = _RangeFile(self, url, size)
            with zipfile.ZipFile(remote) as wheel:
                names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
                if not names:
                    return None
                text = wheel.read(names[0])
        except (zipfile.BadZipFile, _NoRanges):
            return None
        self._store(url + "#METADATA", Response(200, text))
        return text


class _NoRanges(Exception):
    pass


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file; each uncached read is one Range request."""

    BLOCK = 256 * 1024

    def __init__(self, client: Client, url: str, size: int | None):
        super().__init__()
        self.client, self.url, self.pos = client, url, 0
        self.chunks: list[tuple[int, bytes]] = []
        self.size = size if size else self._probe()

    def _range(self, start: int, end: int) -> Response:
        try:
            response = self.client.transport.get(self.url, {"Range": f"bytes={start}-{end - 1}"})
        except Unreachable as exc:
            raise unreachable(exc) from None
        if response.status != 206:
            raise _NoRanges(self.url)
        return response

    def _probe(self) -> int:
        match = re.search(r"/(\d+)$", self._range(0, 1).header("content-range") or "")
        if not match:
            raise _NoRanges(self.url)
        return int(match.group(1))

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def read(self, n=-1):
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        for start, data in self.chunks:
            if start <= self.pos and end <= start + len(data):
                out = data[self.pos - start:end - start]
                self.pos = end
                return out
        # read ahead a block; near the end read behind instead (EOCD, then the central directory)
        stop = min(self.size, max(end, self.pos + self.BLOCK))
        start = max(0, min(self.pos, stop - self.BLOCK))
        data = self._range(start, stop).body
        self.chunks.append((start, data))
        out = data[self.pos - start:end - start]
        self.pos = end
        return out

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)
