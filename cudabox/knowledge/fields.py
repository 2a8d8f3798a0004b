"""Field readers for the matrix YAML: each checks one value and says what is wrong with it.

`Record` reads one mapping key by key and reports problems at file:line
(exit 2); `loader` builds the typed records with it.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..errors import InputError, located
from ..files import Node
from .frameworks import template_regex
from .model import DriverVersion, Provenance, PythonSupport, cc_tuple, parse_arch

STATUSES = ("verified", "unverified", "inferred")


def string(v):
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ValueError("expected a string")
    return str(v)


def version(v):
    if isinstance(v, float):
        raise ValueError(f"write versions as quoted strings (YAML read {v!r} as a number)")
    s = string(v)
    if not re.fullmatch(r"\d+(\.\d+){0,4}", s):
        raise ValueError(f"not a version: {s!r}")
    return s


def minor(v):
    s = version(v)
    if s.count(".") != 1:
        raise ValueError(f"expected major.minor, got {s!r}")
    return s


def cc(v):
    s = minor(v)
    cc_tuple(s)
    return s


def driver(v):
    if v is None:
        return None
    if isinstance(v, float):
        raise ValueError(f"quote driver versions (YAML read {v!r} as a number)")
    return DriverVersion.parse(string(v))


def integer(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("expected an integer")
    return v


def boolean(v):
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


def number(v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("expected a number or null")
    return float(v)


def list_of(kind):
    def read(v):
        if not isinstance(v, list):
            raise ValueError("expected a list")
        return tuple(kind(x) for x in v)

    return read


def arch(prefix):
    def read(v):
        s = string(v)
        if parse_arch(s)[0] != prefix:
            raise ValueError(f"expected a {prefix}_XY target, got {s!r}")
        return s

    return read


def specifier(v):
    s = string(v)
    try:
        SpecifierSet(s)
    except InvalidSpecifier:
        raise ValueError(f"not a version specifier: {s!r}") from None
    return s


def pin(v):
    """An exact version ("9.1.0.70") or a specifier (">=9.8,<10"), normalised to a specifier."""
    if v is None:
        return None
    s = string(v)
    return specifier(s if s[0] in "=<>!~" else f"=={s}")


def python(v):
    if isinstance(v, list):
        return PythonSupport(versions=tuple(minor(x) for x in v))
    return PythonSupport(spec=specifier(v))


def template(v):
    """A name template with {major}/{minor}/{cudnn} fields ("cu{major}{minor}")."""
    s = string(v)
    template_regex(s)  # raises ValueError naming an unknown field
    return s


def choice(*options):
    def read(v):
        s = string(v)
        if s not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {s!r}")
        return s

    return read


def cuda_ranges(v):
    if v is None:
        return None
    out = []
    for item in list_of(string)(v):
        lo, _, hi = item.partition("-")
        out.append((minor(lo), minor(hi or lo)))
    return tuple(out)


def optional(kind):
    return lambda v: None if v is None else kind(v)


class Record:
    """Reads one YAML mapping field by field; reports problems at file:line."""

    def __init__(self, node, path: str, what: str):
        if not isinstance(node, Node):
            line = getattr(node, "line", None)
            raise located(path, line, f"{what}: expected a mapping")
        self.node, self.path, self.what = node, path, what
        self.used: set = set()

    def error(self, key, message) -> InputError:
        return located(self.path, self.node.line_of(key), message)

    def get(self, key, kind, default=...):
        self.used.add(key)
        if key not in self.node:
            if default is ...:
                raise located(self.path, self.node.line, f"{self.what}: missing required key '{key}'")
            return default
        try:
            return kind(self.node[key])
        except ValueError as exc:
            raise self.error(key, f"{self.what}: '{key}': {exc}") from None

    def prov(self) -> Provenance:
        source = self.get("source", lambda v: list_of(string)(v) if isinstance(v, list) else (string(v),))
        if not source or not all(source):
            raise self.error("source", f"{self.what}: 'source' must name a source")
        return Provenance(
            source=source,
            status=self.get("status", choice(*STATUSES), "verified"),
            note=self.get("note", string, None),
            origin=f"{self.path}:{self.node.line}",
        )

    def done(self):
        unknown = [k for k in self.node if k not in self.used]
        if unknown:
            raise self.error(unknown[0], f"{self.what}: unknown key '{unknown[0]}'")
        return self

