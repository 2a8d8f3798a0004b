"""Talking to a running job: its streams, its TTY, signals; and ps/logs/stop/exec for detached jobs.

Why not `containers.run()`: its `remove=True` is client-side (a failed start
leaves a Created container) and it neither forwards signals nor handles a
TTY. Here the attach socket is opened before the container starts (no output
is lost), SIGINT/SIGTERM/SIGHUP are forwarded to the job (its init, tini,
passes them on), a second Ctrl-C kills it, and the caller always removes it.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

LABEL = "io.cudabox.run"  # every container cudabox run starts carries it (cudabox ps filters on it)


class SignalGuard:
    """While a job runs, signals to cudabox go to the job instead of raising in cudabox."""

    def __init__(self):
        self.received = 0
        self.count = 0
        self.target = None  # callable(signum, count), set once the container exists
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False

    def _handle(self, signum, frame):
        self.received, self.count = signum, self.count + 1
        if self.target is not None:
            threading.Thread(target=self.target, args=(signum, self.count), daemon=True).start()


def remove(api, cid: str) -> None:
    import docker

    try:
        api.remove_container(cid, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:  # 409: removal already in progress
        if exc.status_code != 409:
            raise


def _pump_out(sock, tty: bool) -> None:
    from docker.utils.socket import STDERR, frames_iter

    outs = {STDERR: sys.stderr.buffer}
    try:
        for stream, data in frames_iter(sock, tty):
            out = outs.get(stream, sys.stdout.buffer)
            out.write(data)
            out.flush()
    except (OSError, ValueError):  # the socket closed under us, or our stdout did
        pass


def _pump_in(raw: socket.socket) -> None:
    fd = sys.stdin.fileno()
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class _RawTerminal:
    """The local terminal in raw mode (keys, Ctrl-C included, go to the job's TTY); restored after."""

    def __init__(self, enabled: bool):
        self.enabled, self.saved = enabled, None

    def __enter__(self):
        if self.enabled:
            import termios
            import tty

            self.saved = termios.tcgetattr(sys.stdin.fileno())
            tty.setraw(sys.stdin.fileno())
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self.saved)


def _resize(resize) -> None:
    try:
        size = os.get_terminal_size(sys.stdout.fileno())
        resize(height=size.lines, width=size.columns)
    except Exception:  # noqa: BLE001 - best effort: a wrong size is cosmetic
        pass


def _streams(sock, *, tty: bool, stdin: bool, resize):
    """Start copying the socket to our stdout/stderr (and stdin to it); returns the output thread."""
    raw = getattr(sock, "_sock", sock)
    raw.settimeout(None)  # a quiet job may say nothing for hours
    out = threading.Thread(target=_pump_out, args=(sock, tty), daemon=True)
    out.start()
    if stdin:
        threading.Thread(target=_pump_in, args=(raw,), daemon=True).start()
    if tty and sys.stdout.isatty():
        _resize(resize)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGWINCH, lambda *_: _resize(resize))
    return out


def attach_and_wait(api, cid: str, *, tty: bool, stdin: bool, guard: SignalGuard, start) -> int:
    """Attach, start, stream until the job exits; returns its exit code. Signals go to the job."""
    import docker

    def forward(signum, count):
        try:
            if count == 1:
                sys.stderr.write(f"\ncudabox: {signal.Signals(signum).name} sent to the job "
                                 "(again to kill it)\n")
                api.kill(cid, signal=signal.Signals(signum).name)
            else:
                api.kill(cid, signal="SIGKILL")
        except docker.errors.APIError:
            pass  # already gone

    sock = api.attach_socket(cid, params={"stdin": int(stdin), "stdout": 1, "stderr": 1, "stream": 1})
    start()
    guard.target = forward
    if guard.received:  # a signal arrived while the container was being created
        forward(guard.received, 1)
    out = _streams(sock, tty=tty, stdin=stdin, resize=lambda **kw: api.resize(cid, **kw))
    with _RawTerminal(tty and stdin and sys.stdin.isatty()):
        code = api.wait(cid)["StatusCode"]
    out.join(timeout=5)
    return code


class LimitRefused(Exception):
    """The engine could not set a ulimit (`kind`: the kernel's RLIMIT number, as runc reports it)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def run_container(api, image_id: str, config: dict, host: dict, *, detach: bool, keep: bool, tty: bool,
                  explain) -> int:
    """Create, attach, start, wait, remove; returns the exit code (0 and the name when detached).

    `explain(exc, doing)` turns an engine error into the CudaboxError to raise."""
    import re

    import docker

    with SignalGuard() as guard:
        try:
            cid = api.create_container(image_id, host_config=api.create_host_config(**host), **config)["Id"]
        except docker.errors.APIError as exc:
            raise explain(exc, "the engine refused the job") from None

        def start():
            try:
                api.start(cid)
            except docker.errors.APIError as exc:
                refused = re.search(r"error setting rlimit type (\d+)", str(exc))
                if refused:
                    raise LimitRefused(refused.group(1), str(exc.explanation or exc)) from None
                raise explain(exc, "the job could not start") from None

        kept = False
        try:
            if guard.received:
                return 128 + guard.received
            if detach:
                start()
                kept = True
                print(api.inspect_container(cid)["Name"].lstrip("/"))
                return 0
            kept = keep
            return attach_and_wait(api, cid, tty=tty, stdin=config["stdin_open"], guard=guard, start=start)
        finally:
            if not kept:
                remove(api, cid)


# --------------------------------------------------------------------------- detached jobs


def find_job(api, name: str) -> dict:
    import docker

    from ..errors import InputError

    try:
        info = api.inspect_container(name)
    except docker.errors.NotFound:
        info = None
    if not info or LABEL not in ((info.get("Config") or {}).get("Labels") or {}):
        raise InputError(f"no cudabox job named {name!r} (`cudabox ps -a` lists them)")
    return info


def jobs(api, *, all_: bool = False) -> list[dict]:

    out = []
    for c in api.containers(all=all_, filters={"label": LABEL}):
        labels = c.get("Labels") or {}
        out.append({"name": (c.get("Names") or ["?"])[0].lstrip("/"), "project": labels.get("io.cudabox.project"),
                    "status": c.get("Status"), "state": c.get("State"), "command": c.get("Command"),
                    "image": c.get("Image"), "id": c["Id"][:12], "created": c.get("Created")})
    return out


def logs(api, name: str, *, follow: bool = False, tail: str = "all") -> None:
    """A job's output so far (and, with `follow`, as it comes): stdout to stdout, stderr to stderr."""
    import struct

    info = find_job(api, name)
    params = {"stdout": 1, "stderr": 1, "follow": int(follow), "tail": tail}
    res = api._get(api._url("/containers/{0}/logs", info["Id"]), params=params, stream=True)
    api._raise_for_status(res)
    if follow:
        api._disable_socket_timeout(api._get_raw_response_socket(res))
    if info["Config"]["Tty"]:  # one raw stream
        for chunk in res.iter_content(4096, False):
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        return
    while len(header := res.raw.read(8)) == 8:  # frames: stream id, size, data (chunked HTTP underneath)
        stream, size = struct.unpack(">BxxxL", header)
        data = res.raw.read(size) if size else b""
        target = sys.stderr.buffer if stream == 2 else sys.stdout.buffer
        target.write(data)
        target.flush()


def stop(api, name: str, *, keep: bool = False, timeout: int = 10) -> str:
    info = find_job(api, name)
    api.stop(info["Id"], timeout=timeout)
    if not keep:
        remove(api, info["Id"])
    return info["Name"].lstrip("/")


def exec_in(api, name: str, command: list[str], *, tty: bool, stdin: bool, env: dict | None = None) -> int:
    """Run a command inside a running job, as the job's user; returns its exit code."""
    import time

    from ..errors import InputError

    info = find_job(api, name)
    if not info["State"].get("Running"):
        raise InputError(f"job {name!r} is not running ({info['State'].get('Status')})")
    exec_id = api.exec_create(info["Id"], command, stdin=stdin, tty=tty, environment=env or None)["Id"]
    sock = api.exec_start(exec_id, socket=True, tty=tty)
    out = _streams(sock, tty=tty, stdin=stdin, resize=lambda **kw: api.exec_resize(exec_id, **kw))
    with _RawTerminal(tty and stdin and sys.stdin.isatty()):
        out.join()
    for _ in range(50):
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code is not None:
            return code
        time.sleep(0.02)
    return 1
