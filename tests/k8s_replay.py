"""A tiny Kubernetes API server that replays a recorded exchange (tests/fixtures/k8s/*.json).

No API server can run on the CI machine, so `cudabox run --on k8s` talks to this
real HTTP server instead, through the real `kubernetes` client and a real
kubeconfig. Each exchange entry answers one request (method + path, optional
query): a JSON body, a watch stream (one JSON event per line, as the API
server sends them), or plain text (pod logs); `repeat: true` entries answer
every later matching request. Every request is kept for assertions; a request
nothing answers gets a 404 Status and is recorded as unexpected.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

FIXTURES = Path(__file__).parent / "fixtures" / "k8s"


class Replay:
    def __init__(self, exchange: list[dict]):
        self.exchange = [dict(e, used=False) for e in exchange]
        self.requests: list[dict] = []
        self.unexpected: list[str] = []
        self.lock = threading.Lock()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one response per connection; the end of a stream closes it

            def log_message(self, *args):
                pass

            def _serve(self):
                url = urlsplit(self.path)
                query = dict(parse_qsl(url.query))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                entry = replay.take(self.command, url.path, query, body)
                if entry is None:
                    return self._send(404, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                       "reason": "NotFound", "code": 404}).encode(), "application/json")
                if "events" in entry:
                    self.send_response(entry["status"])
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    for event in entry["events"]:
                        self.wfile.write(json.dumps(event).encode() + b"\n")
                        self.wfile.flush()
                    return None
                if "text" in entry:
                    return self._send(entry["status"], entry["text"].encode(), "text/plain")
                return self._send(entry["status"], json.dumps(entry["json"]).encode(), "application/json")

            def _send(self, status, data, kind):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @classmethod
    def load(cls, name: str) -> "Replay":
        return cls(json.loads((FIXTURES / f"{name}.json").read_text())["exchange"])

    def take(self, method: str, path: str, query: dict, body: bytes) -> dict | None:
        with self.lock:
            self.requests.append({"method": method, "path": path, "query": query,
                                  "body": json.loads(body) if body else None})
            for entry in self.exchange:
                if entry["method"] != method or entry["path"] != path or (entry["used"] and not entry.get("repeat")):
                    continue
                if any(query.get(k) != v for k, v in (entry.get("query") or {}).items()):
                    continue
                if "query" not in entry and query.get("watch"):
                    continue
                entry["used"] = True
                return entry
            self.unexpected.append(f"{method} {path}?{query}")
            return None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig whose current context points at this server (a token, as a real one would carry)."""
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "replay",
            "clusters": [{"name": "replay", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [{"name": "replay", "context": {"cluster": "replay", "user": "tester",
                                                         "namespace": namespace}}]}))
        return path

    def __enter__(self) -> "Replay":
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
