"""The Docker Engine API calls of jobs (run, ps, stop, a job's container) as plain requests, sent over the
engine's Unix socket with the standard library.

Why: importing the docker SDK (requests, urllib3: ~70 ms) and its version handshake were most of what
`cudabox run` added to `docker run`. A local engine (DOCKER_HOST unset or unix://) is spoken to here
directly; tcp://, ssh:// and TLS hosts get the same requests through the SDK's session (docker.py's SdkAPI),
so each call is written once. The bodies are the SDK's (tests/test_engine.py compares them), with what it
takes from the docker client config (~/.docker/config.json: proxies injected into the job, detachKeys).
"""

from __future__ import annotations

import json
import os
import socket
import struct
from urllib.parse import quote, urlencode

from ..errors import CudaboxError
from ..files import read_input
from .interface import STDERR, STDOUT, ContainerSpec, EngineError, GpuAccess, NoSuchContainer

DEFAULT = object()  # a call's timeout: the engine's own (the connection's) unless given
_BYTE_UNITS = {"b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def _error(status: int, body: bytes) -> EngineError:
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    text = message or body.decode("utf-8", "replace").strip() or f"HTTP {status}"
    return (NoSuchContainer if status == 404 else EngineError)(text, status)


def decode(status: int, body: bytes):
    if status >= 400:
        raise _error(status, body)
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


class UnixAPI:
    """HTTP/1.1 to a Unix socket, one connection per request (the engine closes it after the answer)."""

    base_url = "http+docker://localhost"  # what the SDK calls a local engine (config.json's proxies are keyed so)

    def __init__(self, path: str, timeout: float):
        self.path, self.timeout, self.version = path or "/var/run/docker.sock", timeout, None

    def ping(self) -> None:
        """The first exchange: the engine answers (within the timeout) and says its API version."""
        sock, status, headers, rest = self._send("GET", "/_ping", timeout=self.timeout)
        body = self._body(sock, headers, rest)
        if status != 200:
            raise _error(status, body)
        self.version = headers.get("api-version") or self.call("GET", "/version", versioned=False)["ApiVersion"]

    def call(self, method: str, path: str, *, params=None, body=None, timeout=DEFAULT, versioned=True):
        """One request; its JSON (or text) answer, or EngineError / NoSuchContainer (404)."""
        sock, status, headers, rest = self._send(method, path, params=params, body=body, timeout=timeout,
                                                 versioned=versioned)
        return decode(status, self._body(sock, headers, rest))

    def attach(self, cid: str, params: dict, tty: bool) -> "Attachment":
        """POST /containers/ID/attach, upgraded: the socket then carries the job's streams both ways."""
        sock, status, headers, rest = self._send("POST", f"/containers/{quote(cid, safe='')}/attach", params=params,
                                                 upgrade=True)
        if status >= 400:
            raise _error(status, self._body(sock, headers, rest))
        return Attachment(sock, tty=tty, rest=rest)

    def _send(self, method, path, *, params=None, body=None, timeout=DEFAULT, versioned=True, upgrade=False):
        target = (f"/v{self.version}" if versioned and self.version else "") + path
        params = {k: v for k, v in (params or {}).items() if v is not None}
        if params:
            target += "?" + urlencode(params)
        data = b"" if body is None else json.dumps(body).encode()
        head = [f"{method} {target} HTTP/1.1", "Host: docker", "User-Agent: cudabox",
                *(["Content-Type: application/json"] if body is not None else []),
                *([f"Content-Length: {len(data)}"] if body is not None or method in ("POST", "PUT") else []),
                *(["Connection: Upgrade", "Upgrade: tcp"] if upgrade else ["Connection: close"])]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout if timeout is DEFAULT else timeout)
            sock.connect(self.path)
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
            status, headers, rest = _read_head(sock)
        except BaseException as exc:
            sock.close()
            if isinstance(exc, OSError):  # refused, gone, timed out: said in one line by the caller
                raise EngineError(f"the engine did not answer ({exc.strerror or exc})") from None
            raise
        return sock, status, headers, rest

    @staticmethod
    def _body(sock, headers: dict, rest: bytes) -> bytes:
        try:
            return UnixAPI._read_body(sock, headers, rest)
        except OSError as exc:
            raise EngineError(f"the engine's answer was cut short ({exc.strerror or exc})") from None
        finally:
            sock.close()

    @staticmethod
    def _read_body(sock, headers: dict, rest: bytes) -> bytes:
        reader = _Reader(sock, rest)
        if "chunked" in headers.get("transfer-encoding", ""):
            out = []
            while True:
                size = int(reader.line().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return b"".join(out)
                out.append(reader.exactly(size))
                reader.line()
        if "content-length" in headers:
            return reader.exactly(int(headers["content-length"]))
        return reader.until_closed()


class _Reader:
    """Bytes from a socket, after the ones already read with the headers."""

    def __init__(self, sock, rest: bytes = b""):
        self.sock, self.buf = sock, rest

    def recv(self, n: int) -> bytes:
        if self.buf:
            data, self.buf = self.buf[:n], self.buf[n:]
            return data
        return self.sock.recv(n)

    def exactly(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            data = self.recv(min(left, 1 << 16))
            if not data:
                raise EngineError("the engine closed the connection mid-answer")
            parts.append(data)
            left -= len(data)
        return b"".join(parts)

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EngineError("the engine closed the connection mid-answer")
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def until_closed(self) -> bytes:
        parts = [self.buf]
        self.buf = b""
        while data := self.sock.recv(1 << 16):
            parts.append(data)
        return b"".join(parts)


def _read_head(sock) -> tuple[int, dict, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(1 << 16)
        if not data:
            raise EngineError("the engine closed the connection without an answer")
        buf += data
        if len(buf) > 1 << 20:
            raise EngineError("the engine's answer has no end of headers")
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise EngineError(f"not an HTTP answer from the engine: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return int(parts[1]), headers, rest


class Attachment:
    """A hijacked Engine API connection: multiplexed frames out (unless TTY), raw bytes in."""

    def __init__(self, sock, tty: bool, rest: bytes = b""):
        self.sock, self.tty = sock, tty  # the SDK's socket wrapper must stay referenced
        self.raw = getattr(sock, "_sock", sock)
        self.raw.settimeout(None)  # a quiet job may say nothing for hours
        self.reader = _Reader(self.raw, rest)

    def frames(self):
        """(STDOUT | STDERR, data) until the stream ends; data as it comes, not whole frames."""
        try:
            if self.tty:
                while data := self.reader.recv(1 << 16):
                    yield STDOUT, data
                return
            while True:
                header = self.reader.exactly(8)
                stream, size = struct.unpack(">BxxxL", header)
                while size > 0:
                    data = self.reader.recv(min(size, 1 << 16))
                    if not data:
                        return
                    size -= len(data)
                    yield (STDERR if stream == 2 else STDOUT), data
        except EngineError:  # closed between frames: the job ended
            return

    def send(self, data: bytes) -> None:
        self.raw.sendall(data)

    def close_input(self) -> None:
        self.raw.shutdown(socket.SHUT_WR)


# --------------------------------------------------------------------------- request bodies


def device_requests(gpus, access: GpuAccess | None = None) -> list[dict]:
    """("all",) | device indexes/UUIDs -> the Engine API's DeviceRequests, in the form this engine
    takes (--gpus style, or CDI device names nvidia.com/gpu=0)."""
    ids = list(gpus)
    if not ids:
        return []
    if access is not None and access.kind == "cdi":
        return [_device("cdi", 0, [f"nvidia.com/gpu={i}" for i in ids], [])]
    if ids == ["all"]:
        return [_device("", -1, [], [["gpu"]])]
    return [_device("", 0, ids, [["gpu"]])]


def _device(driver: str, count: int, ids: list, capabilities: list) -> dict:
    return {"Driver": driver, "Count": count, "DeviceIDs": ids, "Capabilities": capabilities, "Options": {}}


def parse_bytes(text: str) -> int:
    """Docker's sizes: 16g, 512m, 1024 (bytes); k/m/g are powers of 1024, a trailing b is allowed."""
    s = str(text).strip().lower()
    if len(s) > 1 and s[-1] == "b" and s[-2].isalpha():
        s = s[:-1]
    digits, unit = (s, "b") if s[-1:].isdigit() else (s[:-1], s[-1:])
    try:
        if unit not in _BYTE_UNITS:
            raise ValueError
        return int(float(digits) * _BYTE_UNITS[unit])
    except ValueError:
        raise EngineError(f"{text!r} is not a size (e.g. 16g, 512m)") from None


def client_config() -> dict:
    """The docker client's config.json ($DOCKER_CONFIG, ~/.docker, ~/.dockercfg), as the SDK reads it."""
    candidates = [os.path.join(os.environ["DOCKER_CONFIG"], "config.json")] if os.environ.get("DOCKER_CONFIG") else []
    candidates += [os.path.expanduser("~/.docker/config.json"), os.path.expanduser("~/.dockercfg")]
    for path in candidates:
        if os.path.exists(path):
            try:
                data = json.loads(read_input(path))  # bounded, regular files only
            except (CudaboxError, ValueError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def proxy_env(config: dict, base_url: str) -> list[str]:
    """The proxies the client config sets for this engine, as variables a job gets (before its own)."""
    proxies = config.get("proxies") or {}
    chosen = proxies.get(base_url, proxies.get("default", {})) if isinstance(proxies, dict) else {}
    out = []
    for key, name in (("httpProxy", "http_proxy"), ("httpsProxy", "https_proxy"), ("ftpProxy", "ftp_proxy"),
                      ("noProxy", "no_proxy")):
        if isinstance(chosen, dict) and chosen.get(key):
            out += [f"{name}={chosen[key]}", f"{name.upper()}={chosen[key]}"]
    return out


def container_body(spec: ContainerSpec, gpus: GpuAccess | None, proxies: list[str]) -> dict:
    """POST /containers/create's body for `spec`, key for key what the SDK's create_container sends."""
    host = {"NetworkMode": "default", "Binds": list(spec.binds),
            "Ulimits": [{"Name": n, "Soft": s, "Hard": h} for n, s, h in spec.ulimits], "Init": spec.init}
    if spec.shm_size is not None:
        host["ShmSize"] = parse_bytes(spec.shm_size)
    if spec.ipc:
        host["IpcMode"] = spec.ipc
    if spec.ports:
        host["PortBindings"] = {key: [_binding(b) for b in (value if isinstance(value, list) else [value])]
                                for key, value in spec.ports.items()}
    if spec.tmpfs:
        host["Tmpfs"] = dict(spec.tmpfs)
    requests = device_requests(spec.gpus, gpus)
    if requests:
        host["DeviceRequests"] = requests
    env = proxies + [f"{k}={v}" for k, v in spec.env.items()]
    body = {"ExposedPorts": {key: {} for key in spec.ports} or None, "User": spec.user, "Tty": spec.tty,
            "OpenStdin": spec.stdin, "StdinOnce": spec.stdin, "AttachStdin": spec.stdin, "AttachStdout": True,
            "AttachStderr": True, "Env": env or None, "Cmd": spec.command or None, "Image": spec.image,
            "NetworkDisabled": False, "WorkingDir": spec.workdir, "HostConfig": host, "Labels": spec.labels}
    return {k: v for k, v in body.items() if v is not None}


def _binding(binding) -> dict:
    if not isinstance(binding, tuple):  # a host port alone
        return {"HostIp": "", "HostPort": str(binding)}
    if len(binding) == 2:
        return {"HostIp": binding[0], "HostPort": "" if binding[1] is None else str(binding[1])}
    return {"HostIp": binding[0], "HostPort": ""}
