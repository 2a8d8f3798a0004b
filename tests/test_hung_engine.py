"""An engine that accepts connections and never answers: the first call gives up after the short
connect timeout with the usual one line (exit 5), not after the 600 s build timeout (issue #16).

The stand-in is a real Unix socket that accepts and stays silent (what a wedged dockerd looks like)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.support import run_cli


@pytest.fixture
def silent_engine(tmp_path):
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(64)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"unix://{path}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("args", [("doctor", "--json"), ("ps",), ("images", "ls"), ("validate", "some/image")])
def test_a_silent_engine_is_given_up_on_quickly(silent_engine, args):
    started = time.monotonic()
    proc = run_cli(*args, env={"DOCKER_HOST": silent_engine, "CUDABOX_CONNECT_TIMEOUT": "2"}, timeout=60)
    took = time.monotonic() - started
    assert took < 20, f"took {took:.1f}s"
    text = proc.stdout + proc.stderr
    assert "did not answer within 2s" in text, text
    assert "Traceback" not in text
    if args[0] != "doctor":
        assert proc.returncode == 5 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
