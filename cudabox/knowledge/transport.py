"""The PyPI client's HTTP (knowledge/pypi.py): kept-alive connections, each host resolved once.

A cold `cudabox matrix refresh` makes ~600 requests to one host, 32 at a time.
urllib opens a fresh connection for each: a DNS lookup, a TCP and a TLS
handshake per request, and a resolver that drops some of 32 concurrent
lookups costs a 5 s retry each (measured: a quarter of all requests on a
loaded machine, bench/refresh_cold.py). So connections are pooled per
(scheme, host, port) and reused, and a host's addresses are looked up once per
transport. Proxies are urllib's: the environment's `*_proxy` / `no_proxy`
(https through a CONNECT tunnel, `user:pass@` as Proxy-Authorization); TLS
trust is trust.ca_bundle's.
"""

from __future__ import annotations

import base64
import http.client
import os
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..trust import ca_bundle

USER_AGENT = "cudabox-matrix-refresh (+https://pypi.org/project/cudabox/)"
_RETRY_STATUS = {429, 500, 502, 503, 504}
_REDIRECTS = {301, 302, 303, 307, 308}


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


class _Stale(Exception):
    """A kept-alive connection the server had closed: retry on a new one, not counted as an attempt."""


class HTTPTransport:
    """GET with timeouts, retries with exponential backoff, redirects and kept-alive connections."""

    def __init__(self, *, timeout: float = 15.0, retries: int = 3, backoff: float = 0.5,
                 ca_cert: str | None = None, sleep=time.sleep, proxies: dict | None = None):
        self.timeout, self.retries, self.backoff, self._sleep = timeout, retries, backoff, sleep
        self._context = ssl_context(ca_cert)
        self._proxies = urllib.request.getproxies() if proxies is None else proxies
        self._idle: dict[tuple, list[http.client.HTTPConnection]] = {}
        self._addresses: dict[tuple[str, int], list] = {}
        self._lock, self._resolving = threading.Lock(), {}

    def get(self, url: str, headers: dict | None = None, *, quick: bool = False) -> Response:
        """GET `url`; `quick` = one short try (for optional sources such as the PyTorch index)."""
        headers = {"User-Agent": USER_AGENT, **(headers or {})}
        attempts = 1 if quick else 1 + self.retries
        reason = "no attempt"
        attempt = 0
        while attempt < attempts:
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            attempt += 1
            try:
                response = self._follow(url, headers, 3.0 if quick else self.timeout)
            except _Stale:
                attempt -= 1  # the server closed an idle connection: no time was lost
                continue
            except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
                reason = _reason(exc)
                continue
            if response.status not in _RETRY_STATUS or attempt == attempts:
                return response
            reason = f"HTTP {response.status}"
        raise Unreachable(url, reason)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    # ---------------------------------------------------------------- one request

    def _follow(self, url: str, headers: dict, timeout: float) -> Response:
        for _ in range(5):
            response = self._once(url, headers, timeout)
            location = response.header("location")
            if response.status not in _REDIRECTS or not location:
                return response
            url = urllib.parse.urljoin(url, location)
        return response

    def _once(self, url: str, headers: dict, timeout: float) -> Response:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OSError(f"unsupported URL {url}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        proxy = self._proxy_for(parts.scheme, parts.hostname)
        key = (parts.scheme, parts.hostname, port, proxy)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        sent = dict(headers)
        if proxy and parts.scheme == "http":  # plain HTTP through a proxy: absolute URL, credentials inline
            target = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))
            sent.update(proxy[2])
        conn, reused = self._checkout(key, parts.scheme, parts.hostname, port, proxy, timeout)
        try:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.request("GET", target, headers=sent)
            resp = conn.getresponse()
            body = resp.read()
        except (http.client.BadStatusLine, ConnectionError, ssl.SSLEOFError) as exc:  # the peer had hung up
            conn.close()
            if reused:
                raise _Stale() from exc
            raise
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._checkin(key, conn)
        return Response(resp.status, body, {k.lower(): v for k, v in resp.getheaders()})

    # ---------------------------------------------------------------- connections

    def _proxy_for(self, scheme: str, host: str) -> tuple | None:
        """(host, port, headers) of the proxy for `scheme`, or None (no proxy, or no_proxy says so)."""
        proxy = self._proxies.get(scheme)
        if not proxy or _bypass(host, self._proxies):
            return None
        parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        auth = {}
        if parts.username is not None:
            creds = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            auth["Proxy-Authorization"] = "Basic " + base64.b64encode(creds.encode()).decode("ascii")
        return parts.hostname or "", parts.port or 80, tuple(sorted(auth.items()))

    def _checkout(self, key, scheme, host, port, proxy, timeout):
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop(), True
        if proxy:
            dial_host, dial_port = proxy[0], proxy[1]
        else:
            dial_host, dial_port = host, port
        if scheme == "https":
            conn = http.client.HTTPSConnection(dial_host, dial_port, timeout=timeout, context=self._context)
            if proxy:
                conn.set_tunnel(host, port, headers=dict(proxy[2]))
        else:
            conn = http.client.HTTPConnection(dial_host, dial_port, timeout=timeout)
        conn._create_connection = self._connect  # http.client's hook for opening the socket
        return conn, False

    def _checkin(self, key, conn) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def _connect(self, address, timeout=None, source_address=None):
        """socket.create_connection with the host's addresses looked up once per transport."""
        host, port = address
        addresses = self._resolve(host, port)
        error: OSError | None = None
        for family, kind, proto, _, sockaddr in addresses:
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        with self._lock:  # every address failed: look the host up again next time
            self._addresses.pop((host, port), None)
        raise error or OSError(f"no address for {host}")

    def _resolve(self, host: str, port: int) -> list:
        with self._lock:
            if (host, port) in self._addresses:
                return self._addresses[(host, port)]
            gate = self._resolving.setdefault((host, port), threading.Lock())
        with gate:  # one lookup per host, the other threads wait for its answer
            with self._lock:
                if (host, port) in self._addresses:
                    return self._addresses[(host, port)]
            found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
            with self._lock:
                self._addresses[(host, port)] = found
            return found


def _bypass(host: str, proxies: dict) -> bool:
    """no_proxy, as urllib reads it (from `proxies` when given, else the environment)."""
    if "no" in proxies:
        return urllib.request.proxy_bypass_environment(host, proxies)
    return bool(urllib.request.proxy_bypass(host))


def _reason(exc: Exception) -> str:
    """The OS's or OpenSSL's words (ssl.SSLError.reason is only a code: its strerror has the sentence)."""
    inner = exc.reason if isinstance(getattr(exc, "reason", None), BaseException) else exc
    text = str(getattr(inner, "strerror", None) or inner) or type(inner).__name__
    return text if not isinstance(inner, TimeoutError) else "timed out"
