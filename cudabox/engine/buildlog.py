"""Build progress as events, from either builder, and how it is shown.

BuildKit (`--progress=plain`, from `docker buildx build` or `DOCKER_BUILDKIT=1
docker build`) and the legacy builder (the Engine API's JSON stream) report the
same few things in different shapes: a step starts, is cached, finishes,
prints a line, fails. Both become `Event`s, so the progress display, `--plain`
and the failure message work the same whichever builder ran. Pure logic except
`Display`, which imports rich only when it draws.
"""

from __future__ import annotations

import re
import sys
import time
from collections import deque
from dataclasses import dataclass, field

STEP, CACHED, DONE, OUTPUT, ERROR, LOG = "step", "cached", "done", "output", "error", "log"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_VERTEX = re.compile(r"^#(\d+) (.*)$")
_TIMED = re.compile(r"^(\d+\.\d+) ?(.*)$")
_DONE = re.compile(r"^DONE (\d+(?:\.\d+)?)s$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_INSTRUCTION = re.compile(r"^\[(?:[\w.-]+ )?\d+/\d+\] ")  # "[stack 4/8] RUN ..." or "[2/3] COPY ..."
_LEGACY_STEP = re.compile(r"^Step (\d+/\d+) : (.*)$")
_EXIT = re.compile(r"(?:exit code: |returned a non-zero code: )(\d+)")
_MOUNT = re.compile(r"--mount=\S+\s*")
# exec-form `run:` steps, as the builders print them: ["/bin/sh", "-c", PREAMBLE, "sh", CMD] or [.., "-c", CMD]
_RUN_SECRETS = re.compile(r'RUN \["/bin/sh", ?"-c", ?".*", ?"sh", ?"(.*)"\]$')
_RUN_PLAIN = re.compile(r'RUN \["/bin/sh", ?"-c", ?"(.*)"\]$')


@dataclass(frozen=True)
class Event:
    kind: str  # step | cached | done | output | error | log
    step: str | None = None  # the builder's id for the step ("#5" for BuildKit, "3/9" for the legacy builder)
    name: str = ""  # "[stack 4/8] RUN uv pip install ..."
    text: str = ""  # the output line, the error, or a log line
    seconds: float | None = None


def short(name: str, width: int = 110) -> str:
    """A step name for one line: no --mount flags, whitespace collapsed, a `run:` step's exec form shown
    as its command (not the preamble that loads the build secrets), cut to `width`."""
    text = " ".join(_MOUNT.sub("", name).split())
    command = _RUN_SECRETS.search(text) or _RUN_PLAIN.search(text)
    if command:
        text = text[: command.start()] + "RUN " + command.group(1)
    return text if len(text) <= width else text[: width - 1] + "…"


def is_instruction(name: str) -> bool:
    """A Dockerfile step ("[stack 4/8] RUN ..."), not BuildKit's internal work (context, export)."""
    return bool(_INSTRUCTION.match(name))


class PlainParser:
    """BuildKit's `--progress=plain` lines -> events. Lines look like `#5 [2/3] RUN x`, `#5 0.14 output`,
    `#5 DONE 0.2s`, `#5 CACHED`, `#5 ERROR: ...`; the summary after a failure has no `#N`."""

    def __init__(self):
        self.names: dict[str, str] = {}
        self.image_id: str | None = None

    def feed(self, line: str) -> list[Event]:
        line = _ANSI.sub("", line.rstrip("\r\n"))
        match = _VERTEX.match(line)
        if not match:
            return [Event(LOG, text=line)] if line.strip() else []
        step, rest = "#" + match.group(1), match.group(2).strip()
        if step not in self.names:  # a vertex's first line is its name
            self.names[step] = rest
            return [Event(STEP, step, rest)]
        name = self.names[step]
        if rest == name or _DIGEST.match(rest):  # a repeated header, or the vertex digest
            return []
        if rest == "CACHED":
            return [Event(CACHED, step, name)]
        done = _DONE.match(rest)
        if done:
            return [Event(DONE, step, name, seconds=float(done.group(1)))]
        if rest.startswith("ERROR"):
            return [Event(ERROR, step, name, text=rest[5:].lstrip(": ").strip())]
        timed = _TIMED.match(rest)
        if timed:
            return [Event(OUTPUT, step, name, text=timed.group(2))]
        if rest.startswith("writing image sha256:"):
            self.image_id = rest.split()[2]
        return [Event(LOG, step, name, text=rest)]


class StreamParser:
    """The legacy builder's JSON stream (`{"stream": ...}`, `{"aux": {"ID": ...}}`, `{"error": ...}`) -> events.

    Stream chunks split lines anywhere, so text is buffered up to each newline. The legacy builder
    reports no durations: a step's time is measured here, from its start to the next step's."""

    _NOISE = re.compile(r"^( ---> [0-9a-f]{6,}$| ---> Running in |Removing intermediate container |"
                        r"Successfully (built|tagged) )")

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.buffer = ""
        self.current: tuple[str, str] | None = None
        self.started = 0.0
        self.cached = False
        self.failed = False
        self.image_id: str | None = None

    def feed(self, chunk: dict) -> list[Event]:
        events: list[Event] = []
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("ID"):
            self.image_id = aux["ID"]  # the last one is the built image (each finished stage sends one)
        if "stream" in chunk:
            self.buffer += str(chunk["stream"])
            *lines, self.buffer = self.buffer.split("\n")
            for line in lines:
                events += self._line(line)
        if "status" in chunk:  # pulling a base image
            events.append(Event(LOG, text=" ".join(str(chunk[k]) for k in ("id", "status") if chunk.get(k))))
        if "error" in chunk:
            events += self.flush()
            step, name = self.current or (None, "")
            self.failed = True
            events.append(Event(ERROR, step, name, text=str(chunk["error"]).strip()))
        return events

    def flush(self) -> list[Event]:
        line, self.buffer = self.buffer, ""
        return self._line(line) if line else []

    def close(self) -> list[Event]:
        """The end of the stream: the last step is done (unless it failed or was cached)."""
        events = self.flush()
        if self.current and not self.cached and not self.failed:
            events.append(Event(DONE, *self.current, seconds=round(self.clock() - self.started, 1)))
        self.current = None
        return events

    def _line(self, line: str) -> list[Event]:
        line = _ANSI.sub("", line).rstrip("\r")
        step = _LEGACY_STEP.match(line)
        if step:
            events = self.close()
            self.current = (step.group(1), f"[{step.group(1)}] {step.group(2)}")
            self.started, self.cached = self.clock(), False
            return events + [Event(STEP, *self.current)]
        ident, name = self.current or (None, "")
        if line.strip() == "---> Using cache":
            self.cached = True
            return [Event(CACHED, ident, name)]
        if not line.strip():
            return []
        if self._NOISE.match(line):
            return [Event(LOG, ident, name, text=line.strip())]
        return [Event(OUTPUT, ident, name, text=line)]


@dataclass
class StepState:
    name: str
    status: str = "running"  # running | done | cached | error
    seconds: float | None = None
    output: deque = field(default_factory=lambda: deque(maxlen=15))


class BuildLog:
    """What a build said, condensed: each step's state and last lines, for the display and the error."""

    def __init__(self):
        self.steps: dict[str, StepState] = {}
        self.errors: list[tuple[str | None, str]] = []
        self.tail: deque = deque(maxlen=25)  # lines outside any step (BuildKit's failure summary)

    def add(self, event: Event) -> None:
        state = self.steps.get(event.step) if event.step else None
        if event.kind == STEP and event.step:
            self.steps[event.step] = StepState(event.name)
        elif event.kind == CACHED and state:
            state.status = "cached"
        elif event.kind == DONE and state:
            state.status, state.seconds = "done", event.seconds
        elif event.kind == ERROR:
            if state:
                state.status = "error"
            self.errors.append((event.step, event.text))
        elif event.kind == OUTPUT and state:
            state.output.append(event.text)
        elif event.kind == LOG and not event.step and event.text.strip():
            self.tail.append(event.text)

    def instructions(self) -> list[StepState]:
        return [s for s in self.steps.values() if is_instruction(s.name)]

    def summary(self) -> list[dict]:
        return [{"name": s.name, "status": s.status, "seconds": s.seconds} for s in self.instructions()]

    def failure(self) -> tuple[str, list[str]]:
        """(one line naming the failing step and exit code, the last lines of its output)."""
        step, text = self.errors[-1] if self.errors else (None, "")
        state = self.steps.get(step) if step else None
        if not text:
            text = next((line for line in reversed(self.tail) if line.strip() and not line.startswith(("-", " >"))),
                        "the builder stopped without saying why")
        code = _EXIT.search(text)
        if state is None:
            return f"build failed: {short(text, 300)}", list(self.tail)[-10:]
        where = short(state.name)
        if code:
            return f"build failed at {where} (exit code {code.group(1)})", list(state.output)[-10:]
        return f"build failed at {where}: {short(text, 300)}", list(state.output)[-10:]


class Display:
    """Shows a build on stderr. `plain`: the builder's own lines. A terminal: a live status line (step,
    cache hits, elapsed) above the finished steps. Anything else (CI logs): one line per finished step."""

    def __init__(self, title: str, *, plain: bool = False, stream=None):
        self.title, self.plain = title, plain
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.log = BuildLog()
        self.current = ""
        self.console = self.status = None

    def __enter__(self):
        if self.plain:
            self.stream.write(f"--- {self.title}\n")
            return self
        from rich.console import Console
        from rich.markup import escape

        self.console = Console(file=self.stream, highlight=False, soft_wrap=True)
        self.console.print(f"[bold]{escape(self.title)}[/]")
        if self.console.is_terminal:
            self.status = self.console.status(self._status_text())
            self.status.start()
        return self

    def __exit__(self, *exc):
        if self.status is not None:
            self.status.stop()
        if not self.plain and self.console is not None:
            n = self.log.instructions()
            cached = sum(s.status == "cached" for s in n)
            self.console.print(f"  [dim]{len(n)} steps, {cached} cached, {time.monotonic() - self.started:.1f}s[/]")
        return False

    def line(self, raw: str) -> None:
        """A raw line from the builder (shown with --plain)."""
        if self.plain:
            self.stream.write(raw if raw.endswith("\n") else raw + "\n")
            self.stream.flush()

    def event(self, event: Event) -> None:
        before = self.log.steps.get(event.step).status if event.step in self.log.steps else None
        self.log.add(event)
        if self.plain or not is_instruction(event.name):
            return
        state = self.log.steps.get(event.step)
        if event.kind == STEP:
            self.current = event.name
        elif state and state.status != before and state.status in ("done", "cached", "error"):
            self._finished(state)
        if self.status is not None:
            self.status.update(self._status_text())

    def _finished(self, state: StepState) -> None:
        from rich.markup import escape

        mark = {"done": "[green]✓[/]", "cached": "[dim]=[/]", "error": "[red]✗[/]"}[state.status]
        when = {"cached": "cached", "error": "failed"}.get(state.status) or f"{state.seconds or 0:.1f}s"
        self.console.print(f"  {mark} {escape(short(state.name, 100))} [dim]{when}[/]")

    def _status_text(self) -> str:
        from rich.markup import escape

        steps = self.log.instructions()
        cached = sum(s.status == "cached" for s in steps)
        return (f"{escape(short(self.current or 'starting', 80))}  [dim]· {len(steps)} steps · {cached} cached · "
                f"{time.monotonic() - self.started:.0f}s[/]")
