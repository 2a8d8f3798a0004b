"""SIGTERM and SIGHUP get what Ctrl-C gets: an exception that unwinds every `finally`.

Python's default for SIGTERM/SIGHUP is to die on the spot, which skips all cleanup: the `docker build`
child keeps running, a smoke-test container stays, the temporary files holding build secrets stay.
`install()` (called by the CLI's main) turns all three signals into `Interrupted`, a KeyboardInterrupt, so
the cleanup written for Ctrl-C runs for each (and code that waits for "a second Ctrl-C" sees a second
SIGTERM the same way). The process then exits 128 + the signal number (130, 143, 129), as a shell reports
a killed child.
"""

from __future__ import annotations

import signal
import threading

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_state: dict = {"raised": None}


class Interrupted(KeyboardInterrupt):
    """A signal asked cudabox to stop; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _handle(signum, frame):
    exc = Interrupted(signum)
    _state["raised"] = exc  # typer turns a KeyboardInterrupt into a silent exit 130: the CLI asks here
    raise exc


def raised() -> Interrupted | None:
    """The last interrupt this process raised (since `install()`)."""
    return _state["raised"]


def reset() -> None:
    """Forget an earlier interrupt (a caller that runs several commands in one process)."""
    _state["raised"] = None


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP to `Interrupted` (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state["raised"], _state["installed"] = None, True
    for sig in HANDLED:
        if signal.getsignal(sig) is signal.SIG_IGN and sig == signal.SIGHUP:
            continue  # started under nohup: keep ignoring hang-ups
        signal.signal(sig, _handle)


def find(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The interrupt behind `exc` (click turns a KeyboardInterrupt into an Abort raised from it)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def settled() -> None:
    """The command has finished: block the signals until the process exits (a signal now has nothing left to
    stop, and at interpreter shutdown Python's handlers are gone, so the default action would turn a done
    command's exit 0 into "killed by SIGTERM"). Blocked signals die with the process."""
    if _state.get("installed") and threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)  # only in the CLI's own process, never in a host program
