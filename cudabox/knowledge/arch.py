"""GPU architectures and driver versions: the record types `cudabox run`'s driver and GPU check needs
(lock/fit.py), kept apart from knowledge/model.py so that a GPU job's preflight doesn't import the whole
matrix model and `packaging` (~20 ms). knowledge.model re-exports them: they are matrix records too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering


# --------------------------------------------------------------------------- versions


@total_ordering
@dataclass(frozen=True)
class DriverVersion:
    """An NVIDIA driver version such as 535.104.05; compared numerically, printed as given."""

    text: str
    parts: tuple[int, ...] = field(compare=False, repr=False, default=())

    PATTERN = re.compile(r"^\d{3}(\.\d{1,3}){0,2}$")

    @classmethod
    def parse(cls, text: str) -> "DriverVersion":
        text = str(text).strip()
        if not cls.PATTERN.match(text):
            raise ValueError(f"not a driver version: {text!r} (expected e.g. 535.104.05)")
        return cls(text, tuple(int(p) for p in text.split(".")))

    @property
    def branch(self) -> int:
        return self.parts[0]

    def _key(self):
        return self.parts + (0,) * (3 - len(self.parts))

    def __eq__(self, other):
        return isinstance(other, DriverVersion) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __lt__(self, other: "DriverVersion"):
        return self._key() < other._key()

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------- architectures


def cc_tuple(cc: str) -> tuple[int, int]:
    major, minor = str(cc).split(".")
    return int(major), int(minor)


def sm_of(cc: str) -> str:
    """Compute capability "12.0" -> SASS target "sm_120"."""
    major, minor = cc_tuple(cc)
    return f"sm_{major}{minor}"


_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def parse_arch(target: str) -> tuple[str, int, int, str]:
    """ "sm_90a" -> ("sm", 9, 0, "a"); "compute_120" -> ("compute", 12, 0, "")."""
    m = _ARCH.match(target)
    if not m:
        raise ValueError(f"not an architecture: {target!r} (expected e.g. sm_80 or compute_90)")
    return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)


@dataclass(frozen=True)
class ArchList:
    """What a build carries: SASS targets, PTX targets, or (JAX) only a documented minimum CC."""

    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    min_cc: str | None = None

    def coverage(self, cc: str, *, ptx_jit: bool) -> str | None:
        """How a GPU of compute capability `cc` is served: "sass sm_86", "ptx compute_90", or None.

        SASS for M.K runs on M.N when K <= N (same major); arch-specific
        `a` targets run only on exactly their CC; family `f` targets count
        like plain SASS within their major. PTX for any arch
        <= cc is JIT-compiled by the driver, which needs the driver to run the
        build's CUDA natively (`ptx_jit`).
        """
        major, minor = cc_tuple(cc)
        best = None
        for target in self.sass:
            _, t_major, t_minor, suffix = parse_arch(target)
            if t_major != major or t_minor > minor or (suffix == "a" and t_minor != minor):
                continue
            if best is None or t_minor > best[0]:
                best = (t_minor, target)
        if best:
            return f"sass {best[1]}"
        if ptx_jit:
            for target in sorted(self.ptx, key=lambda t: parse_arch(t)[1:3], reverse=True):
                _, t_major, t_minor, _ = parse_arch(target)
                if (t_major, t_minor) <= (major, minor):
                    return f"ptx {target}"
        if self.min_cc and not self.sass and cc_tuple(self.min_cc) <= (major, minor):
            return f"cc >= {self.min_cc}"
        return None

    def describe(self) -> str:
        if self.min_cc and not self.sass:
            return f"CC >= {self.min_cc}"
        text = " ".join(self.sass)
        if self.ptx:
            text += " + PTX " + " ".join(self.ptx)
        return text or "none"
