"""pyproject.toml for `cudabox init`: PEP 621 dependencies, Poetry (constraints made PEP 440) and uv indexes.

Split from detect.py for size; it fills the same `Detected`. TOML needs
tomllib (Python 3.11+) or tomli; on 3.10 without tomli the error says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from .detected import Detected, line_of, read_text, requirement
from ..errors import InputError, located
from ..files import display_path


def _load_toml(path: Path, raw: str) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise InputError(f"{display_path(path)}: reading TOML needs Python 3.11+ or the tomli package "
                             "(pip install tomli)") from None
    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at (?:line (\d+)|end of document)", str(exc))
        line = (int(where.group(1)) if where.group(1) else raw.count("\n") or 1) if where else None
        message = re.sub(r"\s*\(at (line|end) .*\)$", "", str(exc))
        raise located(display_path(path), line, f"invalid TOML: {message}") from None


def poetry_constraint(text: str) -> str:
    """A Poetry version constraint -> a PEP 440 specifier (^1.2 -> >=1.2,<2.0; ~1.2.3 -> >=1.2.3,<1.3.0)."""
    out = []
    for part in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", str(text).strip()):
        part = part.strip()
        if part in ("", "*"):
            continue
        if "||" in part or "|" in part:
            raise ValueError(f"{text!r}: alternatives (||) have no PEP 440 form")
        m = re.fullmatch(r"([\^~])\s*(\d+(?:\.\d+)*)", part)
        if m:
            nums = [int(x) for x in m.group(2).split(".")]
            if m.group(1) == "^":
                first = next((i for i, n in enumerate(nums) if n), len(nums) - 1)
                upper = nums[:first] + [nums[first] + 1]
            else:
                upper = [nums[0] + 1] if len(nums) == 1 else [nums[0], nums[1] + 1]
            upper += [0] * (max(len(nums), 2) - len(upper))
            out.append(f">={m.group(2)},<{'.'.join(map(str, upper))}")
        elif re.fullmatch(r"\d+(\.\d+)*(\.\*)?", part):
            out.append(f"=={part}")
        elif re.fullmatch(r"(==|!=|<=|>=|<|>|~=|===)\s*\S+", part):
            out.append(part.replace(" ", ""))
        else:
            raise ValueError(f"{text!r}: not a version constraint")
    return ",".join(out)


def read_pyproject(path: Path, found: Detected) -> None:
    shown = found.show(path)
    raw = read_text(path, shown)
    doc = _load_toml(path, raw)
    project, tool = doc.get("project") or {}, doc.get("tool") or {}
    if not project and "poetry" not in tool:
        return
    found.sources.append(shown)

    def where(*needles: str) -> str:
        line = next((n for n in (line_of(raw, needle) for needle in needles) if n), None)
        return f"{shown}:{line}" if line else shown

    if project.get("requires-python"):
        found.hint_python(str(project["requires-python"]), f"{where('requires-python')} requires-python")
    for text in project.get("dependencies") or []:
        found.add(requirement(text, where(text)), where(text))
    if project.get("optional-dependencies"):
        names = ", ".join(project["optional-dependencies"])
        found.notes.append(f"{shown}: optional dependencies ({names}) not included; add the ones the image "
                           "needs to `requirements:`")
    if doc.get("dependency-groups"):
        found.notes.append(f"{shown}: [dependency-groups] ({', '.join(doc['dependency-groups'])}) not included")
    _read_poetry(tool.get("poetry") or {}, found, where)
    _read_uv(tool.get("uv") or {}, found, where)


def _read_poetry(poetry: dict, found: Detected, where) -> None:
    sources = {s.get("name"): s.get("url") for s in poetry.get("source") or [] if isinstance(s, dict)}
    for name, value in (poetry.get("dependencies") or {}).items():
        at = where(f"{name} =", f'"{name}"', name)
        if isinstance(value, list):
            found.notes.append(f"{at}: {name} has several constraints (per Python/platform); used the first")
            value = value[0] if value else "*"
        table = value if isinstance(value, dict) else {"version": value}
        if any(k in table for k in ("git", "path", "url")):
            found.notes.append(f"{at}: {name} comes from git/path/url; not carried over (use `run:`)")
            continue
        try:
            spec = poetry_constraint(table.get("version", "*"))
        except ValueError as exc:
            raise InputError(f"{at}: {name}: {exc}") from None
        if name.lower() == "python":
            if spec:
                found.hint_python(spec, f"{at} [tool.poetry.dependencies] python")
            continue
        if table.get("optional"):
            found.notes.append(f"{at}: {name} is optional (a Poetry extra); not included")
            continue
        extras = f"[{','.join(table['extras'])}]" if table.get("extras") else ""
        found.add(requirement(f"{name}{extras}{spec}", at), at)
        if table.get("source") in sources and sources[table["source"]]:
            found.add_index(sources[table["source"]], at)
    groups = [g for g in (poetry.get("group") or {})] + (["dev-dependencies"] if "dev-dependencies" in poetry
                                                          else [])
    if groups:
        found.notes.append(f"Poetry groups ({', '.join(groups)}) not included (development dependencies)")


def _read_uv(uv: dict, found: Detected, where) -> None:
    indexes = {i.get("name"): i for i in uv.get("index") or [] if isinstance(i, dict)}
    for index in indexes.values():
        if index.get("url") and not index.get("explicit"):
            found.add_index(index["url"], where(index["url"]))
    for url in ([uv["index-url"]] if uv.get("index-url") else []) + list(uv.get("extra-index-url") or []):
        found.add_index(url, where(url))
    for name, source in (uv.get("sources") or {}).items():
        for entry in source if isinstance(source, list) else [source]:
            if not isinstance(entry, dict):
                continue
            if entry.get("index") in indexes and indexes[entry["index"]].get("url"):
                found.add_index(indexes[entry["index"]]["url"], where(f"{name} ="))
            elif any(k in entry for k in ("git", "path", "url", "workspace")):
                found.notes.append(f"{where(f'{name} =')}: [tool.uv.sources] {name} comes from git/path/url; "
                                   "the image installs it from PyPI (use `run:` for the other source)")
