"""The PyPI client's HTTP (cudabox/knowledge/transport.py) and lazy wheel reads (knowledge/lazywheel.py).

Transport: on a real local HTTP server, kept-alive connections are reused, a host is looked up once,
an idle connection the server closed costs no retry, proxies and no_proxy are urllib's. Lazy wheel:
METADATA out of wheels of every layout, counting the range requests each costs.
"""

from __future__ import annotations

import io
import socket
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cudabox.knowledge import lazywheel
from cudabox.knowledge.transport import HTTPTransport, Unreachable


class _Server:
    """HTTP/1.1 with keep-alive; records each request with the client port it came from."""

    def __init__(self, keep_alive: bool = True):
        self.requests: list[dict] = []
        self.files: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.drop_after_response = False  # close the connection without saying so (an idle timeout)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_CONNECT(self):
                server.requests.append({"method": "CONNECT", "path": self.path, "port": self.client_address[1],
                                        **{k.lower(): v for k, v in self.headers.items()}})
                self._send(407, b"", {"Proxy-Authenticate": "Basic"})
                self.close_connection = True

            def do_GET(self):
                server.requests.append({"method": "GET", "path": self.path, "port": self.client_address[1],
                                        **{k.lower(): v for k, v in self.headers.items()}})
                if self.path in server.redirects:
                    return self._send(301, b"", {"Location": server.redirects[self.path]})
                body = server.files.get(self.path)
                if body is None:
                    return self._send(404, b"")
                self._send(200, body)
                if server.drop_after_response:
                    self.close_connection = True

            def _send(self, status, body, headers=None):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def transport(**kw) -> HTTPTransport:
    kw.setdefault("proxies", {})
    return HTTPTransport(retries=kw.pop("retries", 0), **kw)


def test_kept_alive_connection_is_reused(server):
    server.files["/a"] = b"A"
    t = transport()
    assert [t.get(f"{server.url}/a").body for _ in range(5)] == [b"A"] * 5
    assert len({r["port"] for r in server.requests}) == 1  # five requests, one connection
    t.close()


def test_a_host_is_looked_up_once(monkeypatch):
    s = _Server(keep_alive=False)  # HTTP/1.0: a new connection per request
    s.files["/a"] = b"A"
    calls = []
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    t = transport()
    for _ in range(4):
        assert t.get(f"http://localhost:{s.port}/a").body == b"A"
    s.close()
    assert len({r["port"] for r in s.requests}) == 4 and calls == ["localhost"]


def test_an_idle_connection_the_server_closed_is_replaced_without_a_retry(server):
    server.files["/a"] = b"A"
    server.drop_after_response = True
    slept = []
    t = transport(retries=3, sleep=slept.append)
    assert t.get(f"{server.url}/a").body == b"A"
    assert t.get(f"{server.url}/a").body == b"A"  # the pooled connection is dead: a new one, no backoff
    assert slept == [] and len({r["port"] for r in server.requests}) == 2


def test_redirects_are_followed(server):
    server.files["/pypi/torch/json"] = b"{}"
    server.redirects["/pypi/Torch/json"] = "/pypi/torch/json"
    assert transport().get(f"{server.url}/pypi/Torch/json").body == b"{}"


@pytest.mark.parametrize("proxy_url,auth", [
    ("http://127.0.0.1:{port}", None),
    ("http://us%40r:p%3Ass@127.0.0.1:{port}", "Basic dXNAcjpwOnNz"),  # base64("us@r:p:ss")
])
def test_plain_http_goes_through_the_proxy(server, proxy_url, auth):
    server.files["http://pypi.invalid/pypi/jax/json"] = b"{}"
    t = transport(proxies={"http": proxy_url.format(port=server.port)})
    assert t.get("http://pypi.invalid/pypi/jax/json").status == 200
    assert server.requests[0]["path"] == "http://pypi.invalid/pypi/jax/json"
    assert server.requests[0].get("proxy-authorization") == auth


def test_https_goes_through_a_connect_tunnel(server):
    t = transport(proxies={"https": f"http://me:secret@127.0.0.1:{server.port}"})
    with pytest.raises(Unreachable) as err:
        t.get("https://pypi.invalid/pypi/jax/json")
    assert "407" in err.value.reason
    assert server.requests[0]["method"] == "CONNECT" and server.requests[0]["path"] == "pypi.invalid:443"
    assert server.requests[0]["proxy-authorization"] == "Basic bWU6c2VjcmV0"


def test_no_proxy_goes_direct(server):
    server.files["/a"] = b"A"
    t = transport(proxies={"http": "http://127.0.0.1:9", "no": "127.0.0.1"})  # nobody listens on :9
    assert t.get(f"{server.url}/a").body == b"A"


def test_a_refused_connection_is_unreachable_after_the_retries():
    slept = []
    with pytest.raises(Unreachable) as err:
        transport(retries=2, sleep=slept.append).get("http://127.0.0.1:9/pypi/torch/json")
    assert err.value.reason == "Connection refused" and slept == [0.5, 1.0]


# --------------------------------------------------------------------------- lazy wheel


METADATA = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70\n"


def _wheel(layout: str) -> bytes:
    """A wheel whose .dist-info sits where `layout` says, with enough files to push it out of the tail."""
    buf = io.BytesIO()
    payload = [(f"demo/module_{i:05d}.py", b"x = %d\n" % i) for i in range(3000)]  # ~200 KB of directory
    info = [("demo-1.0.dist-info/METADATA", METADATA), ("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n")]
    record = [("demo-1.0.dist-info/RECORD", b"r" * 200_000)]  # a big RECORD between METADATA and the directory
    files = {"small": info, "last": payload + info + record, "first": info + payload + record,
             "middle": payload[:1500] + info + payload[1500:] + record}[layout]
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zf.writestr(name, data)
    return buf.getvalue()


def _remote(data: bytes) -> tuple[lazywheel.RemoteFile, list]:
    asked = []

    def fetch(start, end):
        asked.append((start, end))
        return data[start:end]

    return lazywheel.RemoteFile(fetch, len(data)), asked


@pytest.mark.parametrize("layout,requests,most_bytes", [
    ("small", 1, 64 * 1024),  # the tail holds the whole wheel
    ("last", 2, 70 * 1024),  # .dist-info written last (bdist_wheel): the tail, then the member
    ("first", 3, 135 * 1024),  # .dist-info first (torch <= 2.3, TensorFlow <= 2.15): the directory's head too
    ("middle", None, None),  # anywhere else: zipfile over the whole directory still finds it
])
def test_lazy_wheel_reads_metadata_with_few_small_ranges(layout, requests, most_bytes):
    data = _wheel(layout)
    remote, asked = _remote(data)
    assert lazywheel.metadata(remote) == METADATA
    if requests is not None:
        assert len(asked) == requests and sum(e - s for s, e in asked) <= most_bytes, asked
    else:
        assert lazywheel._from_tail(_remote(data)[0]) is None  # the fast path says no; the fallback found it


def test_lazy_wheel_reads_zip64_directories(monkeypatch):
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 0)  # zipfile writes the zip64 end records
    data = bytearray(_wheel("last"))
    eocd = data.rfind(b"PK\x05\x06")
    data[eocd + 8:eocd + 20] = b"\xff\xff\xff\xff" + b"\xff\xff\xff\xff" * 2  # "see the zip64 record"
    monkeypatch.undo()
    assert zipfile.ZipFile(io.BytesIO(bytes(data))).read("demo-1.0.dist-info/METADATA") == METADATA
    remote, asked = _remote(bytes(data))
    assert lazywheel._from_tail(remote) == METADATA and len(asked) == 2


def test_lazy_wheel_without_metadata_is_none():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("demo/__init__.py", b"")
    assert lazywheel.metadata(_remote(buf.getvalue())[0]) is None


def test_a_server_answering_other_bytes_than_asked_is_no_ranges():
    remote = lazywheel.RemoteFile(lambda start, end: b"short", 10_000)
    with pytest.raises(lazywheel.NoRanges):
        lazywheel.metadata(remote)


def test_a_tls_failure_is_said_in_openssls_words(server):
    """https:// to a plain-HTTP port fails the handshake: the reason is OpenSSL's sentence, not its bare code."""
    with pytest.raises(Unreachable) as err:
        transport().get(f"https://127.0.0.1:{server.port}/a")
    assert err.value.reason.startswith("[SSL: ") and "] " in err.value.reason, err.value.reason
