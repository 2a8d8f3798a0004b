"""pyproject.toml for `cudabox init`: PEP 621 dependencies, Poetry (constraints made PEP 440) and uv indexes.

Split from detect.py for size; it fills the same `Detected`. TOML needs
tomllib (Python 3.11+) or tomli; on 3.10 without tomli the error says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from .detected import Detected, line_of, read_text
from ..errors import InputError, located
from ..files import display_path


def load_toml(path: Path, raw: str) -> dict:
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


def read_pyproject(path: Path, found: Detected, extras: tuple[str, ...] = ()) -> bool:
    """Read pyproject.toml into `found`; True when it declares dependencies (PEP 621 or Poetry)."""
    shown = found.show(path)
    raw = read_text(path, shown)
    doc = load_toml(path, raw)
    project, tool = doc.get("project") or {}, doc.get("tool") or {}
    if not project and "poetry" not in tool:
        found.skip(shown, "no [project] or [tool.poetry] table (build settings only)")
        return False
    found.sources.append(shown)

    def where(*needles: str) -> str:
        line = next((n for n in (line_of(raw, needle) for needle in needles) if n), None)
        return f"{shown}:{line}" if line else shown

    if project.get("requires-python"):
        found.hint_python(str(project["requires-python"]), f"{where('requires-python')} requires-python")
    for text in project.get("dependencies") or []:
        found.take(text, where(text), where(text))
    optional = project.get("optional-dependencies") or {}
    optional.update(_poetry_extras(tool.get("poetry") or {}))
    queue, taken = list(extras), []
    while queue:  # a group may include others: `lerobot[dataset]` inside lerobot's `training`
        name = queue.pop(0)
        if name in taken:
            continue
        if name not in optional:
            raise InputError(f"{shown}: no optional-dependency group {name!r}"
                             + (f" (it has: {', '.join(optional)})" if optional else " (it has none)"))
        taken.append(name)
        for text in optional[name]:
            included = _self_reference(text, project)
            if included is not None:
                queue += included
                continue
            found.take(text, where(text), f"{where(text)} [{name}]")
    left = [n for n in optional if n not in taken]
    if left:
        names = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        found.notes.append(f"{shown}: optional dependencies ({names}) not included; "
                           f"`cudabox init --extra {left[0]}` includes a group")
    if doc.get("dependency-groups"):
        found.notes.append(f"{shown}: [dependency-groups] ({', '.join(doc['dependency-groups'])}) not included "
                           "(development dependencies)")
    _read_poetry(tool.get("poetry") or {}, found, where, extras)
    _read_uv(tool.get("uv") or {}, found, where)
    for source in (tool.get("pdm") or {}).get("source") or []:
        if isinstance(source, dict) and source.get("url") and source.get("type", "index") == "index":
            found.add_index(str(source["url"]), where(str(source["url"])))
    return bool(project.get("dependencies") or (tool.get("poetry") or {}).get("dependencies"))


def _self_reference(text: str, project: dict) -> list[str] | None:
    """`mypkg[a,b]` inside mypkg's own extras: the groups it includes; None for another package."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        req = Requirement(text)
    except InvalidRequirement:  # reported, with its line, when it is taken
        return None
    same = canonicalize_name(req.name) == canonicalize_name(str(project.get("name", "")))
    return sorted(req.extras) if same else None


def _poetry_extras(poetry: dict) -> dict:
    """[tool.poetry.extras] name -> the optional dependencies it turns on, as PEP 508 strings."""
    deps = poetry.get("dependencies") or {}
    out = {}
    for name, members in (poetry.get("extras") or {}).items():
        reqs = []
        for member in members or []:
            value = deps.get(member, "*")
            table = value if isinstance(value, dict) else {"version": value}
            if isinstance(value, list):
                table = value[0] if value and isinstance(value[0], dict) else {"version": "*"}
            reqs.append(f"{member}{poetry_constraint(table.get('version', '*'))}")
        out[name] = reqs
    return out


def pyproject_requirements(path: Path, extras: list[str]) -> tuple[list[str], list[str]]:
    """What `requirements_file: pyproject.toml[extras]` in cudabox.yaml means, read at every lock."""
    found = Detected(root=path.parent)
    read_pyproject(path, found, tuple(extras))
    return list(found.requirements), list(found.extra_index_urls)


def _read_poetry(poetry: dict, found: Detected, where, extras=()) -> None:
    sources = {s.get("name"): s.get("url") for s in poetry.get("source") or [] if isinstance(s, dict)}
    for name, value in (poetry.get("dependencies") or {}).items():
        at = where(f"{name} =", f'"{name}"', name)
        if isinstance(value, list):
            found.notes.append(f"{at}: {name} has several constraints (per Python/platform); used the first")
            value = value[0] if value else "*"
        table = value if isinstance(value, dict) else {"version": value}
        if "git" in table or "url" in table:
            url = direct_url(table)
            found.take(f"{name} @ {url}", at, at)
            continue
        if "path" in table:
            found.notes.append(f"{at}: {name} comes from the local path {table['path']!r}; not carried over "
                               "(add `run: [\"pip install ./...\"]` if the image needs it)")
            continue
        try:
            spec = poetry_constraint(table.get("version", "*"))
        except ValueError as exc:
            raise InputError(f"{at}: {name}: {exc}") from None
        if name.lower() == "python":
            if spec:
                found.hint_python(spec, f"{at} [tool.poetry.dependencies] python")
            continue
        if table.get("optional"):  # read with its extra above when --extra names it
            if not any(name in members for members in (poetry.get("extras") or {}).values()):
                found.notes.append(f"{at}: {name} is optional (in no Poetry extra); not included")
            continue
        extras = f"[{','.join(table['extras'])}]" if table.get("extras") else ""
        found.take(f"{name}{extras}{spec}", at, at)
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
            elif "git" in entry or "url" in entry:
                at = where(f"{name} =")
                found.replace_source(name, direct_url(entry), at)
            elif any(k in entry for k in ("path", "workspace")):
                found.notes.append(f"{where(f'{name} =')}: [tool.uv.sources] {name} comes from a local path; "
                                   "the image installs it from PyPI (use `run:` for the local copy)")


def direct_url(table: dict) -> str:
    """Poetry/uv `{git = URL, rev/tag/branch = X, subdirectory = D}` or `{url = URL}` -> a PEP 508 URL."""
    if "url" in table:
        return str(table["url"])
    url = str(table["git"])
    url = url if url.startswith("git+") else f"git+{url}"
    ref = table.get("rev") or table.get("tag") or table.get("branch")
    url += f"@{ref}" if ref else ""
    return url + (f"#subdirectory={table['subdirectory']}" if table.get("subdirectory") else "")
