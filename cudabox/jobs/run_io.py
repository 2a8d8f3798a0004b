"""Talking to a running job: its streams, its TTY, signals; and ps/logs/stop/exec for detached jobs.

Through the engine interface only (cudabox.engine). Why not a one-call "run":
a client-side remove leaves a Created container when the start fails, and it
neither forwards signals nor handles a TTY. Here the attachment is opened
before the container starts (no output is lost), SIGINT/SIGTERM/SIGHUP are
forwarded to the job (its init, tini, passes them on), a second Ctrl-C kills
it, and the caller always removes it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from ..engine import JOB_LABEL, STDERR, Container, ContainerSpec, EngineError

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

LABEL = JOB_LABEL  # every container cudabox run starts carries it (cudabox ps filters on it)
CLIENT_LABEL = "io.cudabox.run.client"  # host:pid of the `cudabox run` that removes the container when it ends


def client_id(pid: int | None = None) -> str:
    import socket

    return f"{socket.gethostname()}:{pid or os.getpid()}"


def reap(engine) -> int:
    """Remove ended foreground jobs whose `cudabox run` on this host is gone (kill -9 skipped its cleanup).
    Detached and --keep jobs carry no client label: they stay until `cudabox stop` / `docker rm`."""
    import socket

    host, removed = socket.gethostname(), 0
    for c in engine.containers(LABEL, all_=True):
        client = c.labels.get(CLIENT_LABEL, "")
        owner, _, pid = client.rpartition(":")
        if c.running or owner != host or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its cudabox still runs: it removes the container itself
        except ProcessLookupError:
            pass
        except OSError:  # another user's process: alive
            continue
        try:
            engine.remove(c.id)
            removed += 1
        except EngineError:
            pass
    return removed


class SignalGuard:
    """While a job runs, signals to cudabox go to the job instead of raising in cudabox."""

    def __init__(self):
        self.received = 0
        self.count = 0
        self.target = None  # callable(signum, count), set once the container exists
        self.committed = False  # a detached job was started and kept: from then on signals change nothing
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, signal.SIG_IGN if self.committed else old)
        return False

    def _handle(self, signum, frame):
        self.received, self.count = signum, self.count + 1
        if self.target is not None:
            threading.Thread(target=self.target, args=(signum, self.count), daemon=True).start()


def _pump_out(stream) -> None:
    try:
        for which, data in stream.frames():
            out = sys.stderr.buffer if which == STDERR else sys.stdout.buffer
            out.write(data)
            out.flush()
    except (OSError, ValueError):  # the connection closed under us, or our stdout did
        pass


def _pump_in(stream) -> None:
    fd = sys.stdin.fileno()
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            stream.send(data)
        stream.close_input()
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


def _output(stream) -> threading.Thread:
    """Start copying the job's output to our stdout/stderr; returns the thread."""
    out = threading.Thread(target=_pump_out, args=(stream,), daemon=True)
    out.start()
    return out


def _streams(stream, *, tty: bool, stdin: bool, resize, out: threading.Thread | None = None):
    """Copy the job's output to our stdout/stderr (unless `out` already does) and stdin to it; returns the
    output thread."""
    out = out or _output(stream)
    if stdin:
        threading.Thread(target=_pump_in, args=(stream,), daemon=True).start()
    if tty and sys.stdout.isatty():
        _resize(resize)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGWINCH, lambda *_: _resize(resize))
    return out


def attach_and_wait(engine, cid: str, *, tty: bool, stdin: bool, guard: SignalGuard, start) -> int:
    """Attach, start, stream until the job exits; returns its exit code. Signals go to the job."""

    def forward(signum, count):
        try:
            if count == 1:
                sys.stderr.write(f"\ncudabox: {signal.Signals(signum).name} sent to the job "
                                 "(again to kill it)\n")
                engine.kill(cid, signal.Signals(signum).name)
            else:
                engine.kill(cid, "SIGKILL")
        except EngineError:
            pass  # already gone

    stream = engine.attach(cid, stdin=stdin, tty=tty)
    out = _output(stream)  # reading before the job starts: nothing to wait for once it runs
    start()
    guard.target = forward
    if guard.received:  # a signal arrived while the container was being created
        forward(guard.received, 1)
    _streams(stream, tty=tty, stdin=stdin, resize=lambda **kw: engine.resize(cid, **kw), out=out)
    with _RawTerminal(tty and stdin and sys.stdin.isatty()):
        code = engine.wait(cid)
    out.join(timeout=5)
    return code


class LimitRefused(Exception):
    """The engine could not set a ulimit (`kind`: the kernel's RLIMIT number, as runc reports it)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def run_container(engine, spec: ContainerSpec, gpus, *, detach: bool, keep: bool, explain) -> int:
    """Create, attach, start, wait, remove; returns the exit code (0 and the name when detached).

    `explain(exc, doing)` turns an engine error into the CudaboxError to raise."""
    import re

    with SignalGuard() as guard:
        try:
            cid = engine.create(spec, gpus)
        except EngineError as exc:
            raise explain(exc, "the engine refused the job") from None

        def start():
            try:
                engine.start(cid)
            except EngineError as exc:
                refused = re.search(r"error setting rlimit type (\d+)", str(exc))
                if refused:
                    raise LimitRefused(refused.group(1), exc.explanation) from None
                raise explain(exc, "the job could not start") from None

        kept = False
        try:
            if guard.received:
                return _not_started(guard.received)
            if detach:  # atomic for signals: a job that runs and exit 0, or no job and 128 + the signal
                start()
                if guard.received:  # arrived while it started: take it back
                    return _not_started(guard.received)
                kept = guard.committed = True  # the job runs: exit 0 whatever arrives from now on
                print(engine.inspect(cid).name)
                return 0
            kept = keep
            return attach_and_wait(engine, cid, tty=spec.tty, stdin=spec.stdin, guard=guard, start=start)
        finally:
            if not kept:
                engine.remove(cid)


def _not_started(signum: int) -> int:
    sys.stderr.write(f"cudabox: error: `cudabox run` interrupted ({signal.Signals(signum).name}) before the job "
                     "started; no job was left behind\n")
    return 128 + signum


# --------------------------------------------------------------------------- detached jobs


def find_job(engine, name: str) -> Container:
    from ..errors import InputError

    info = engine.inspect(name)
    if info is None or LABEL not in info.labels:
        raise InputError(f"no cudabox job named {name!r} (`cudabox ps -a` lists them)")
    return info


def jobs(engine, *, all_: bool = False) -> list[dict]:
    reap(engine)
    return [{"name": c.name, "project": c.labels.get("io.cudabox.project"), "status": c.status, "state": c.state,
             "command": c.command, "image": c.image, "id": c.id[:12], "created": c.created}
            for c in engine.containers(LABEL, all_=all_)]


def logs(engine, name: str, *, follow: bool = False, tail: str = "all") -> None:
    """A job's output so far (and, with `follow`, as it comes): stdout to stdout, stderr to stderr."""
    info = find_job(engine, name)
    for which, data in engine.logs(info.id, follow=follow, tail=tail):
        target = sys.stderr.buffer if which == STDERR else sys.stdout.buffer
        target.write(data)
        target.flush()


def stop(engine, name: str, *, keep: bool = False, timeout: int = 10) -> str:
    info = find_job(engine, name)
    engine.stop(info.id, timeout=timeout)
    if not keep:
        engine.remove(info.id)
    return info.name


def exec_in(engine, name: str, command: list[str], *, tty: bool, stdin: bool, env: dict | None = None) -> int:
    """Run a command inside a running job, as the job's user; returns its exit code."""
    import time

    from ..errors import InputError

    info = find_job(engine, name)
    if not info.running:
        raise InputError(f"job {name!r} is not running ({info.status})")
    stream, resize, exit_code = engine.exec(info.id, command, stdin=stdin, tty=tty, env=env)
    out = _streams(stream, tty=tty, stdin=stdin, resize=resize)
    with _RawTerminal(tty and stdin and sys.stdin.isatty()):
        out.join()
    for _ in range(50):
        code = exit_code()
        if code is not None:
            return code
        time.sleep(0.02)
    return 1
