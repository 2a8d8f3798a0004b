"""Errors that reach the user as one clear line and a documented exit code.

Exit codes (docs/exit-codes.md): 1 a check failed, 2 bad input, 3 unsatisfiable
request, 4 passed-without-gpu (validate), 5 environment problem (no engine...).
"""

from __future__ import annotations

import re

# Credentials in URLs: `scheme://user:pass@host` and `?token=...`-style query values. Error messages echo
# what the user wrote; these parts never reach a terminal or a CI log.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]*@")
_SECRET_QUERY = re.compile(r"(?i)([?&;][^=&#\s'\"]*(?:token|key|secret|pass|auth|sig|credential|session)"
                           r"[^=&#\s'\"]*=)[^&#\s'\"]*")


def redact(text: str) -> str:
    """`text` with URL credentials replaced by `***` (user:password@ and token-like query values)."""
    text = _USERINFO.sub(lambda m: m.group(1) + "***@", str(text))
    return _SECRET_QUERY.sub(lambda m: m.group(1) + "***", text)


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def one_line(text: str) -> str:
    """What an error line may print: credentials redacted, control characters (a newline, an escape
    sequence from a hostile file) shown escaped, so an error is always exactly one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], redact(text))


def has_credentials(url: str) -> bool:
    return redact(url) != url


class CudaboxError(Exception):
    """Base class: `str(err)` is what the user sees; `exit_code` is the process exit code."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.hint = redact(hint) if hint else hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class InputError(CudaboxError):
    """Bad input: a file, a flag or a value the user can fix. Names where, says what to do."""

    exit_code = 2


class Unsatisfiable(CudaboxError):
    """No stack satisfies the request; `reasons` name the conflicting facts."""

    exit_code = 3

    def __init__(self, message: str, reasons: list[str], *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.reasons = list(reasons)


class EnvironmentProblem(CudaboxError):
    """The machine lacks something (Docker engine, BuildKit, NVIDIA runtime)."""

    exit_code = 5


class CheckFailed(CudaboxError):
    """A check the user asked for failed (stale lock, images/ out of date, failed build)."""

    exit_code = 1


def located(path, line: int | None, message: str) -> InputError:
    """An InputError that points at `path:line`, the format editors and CI annotate."""
    where = f"{path}:{line}" if line else f"{path}"
    return InputError(f"{where}: {message}")
