"""Show and write what `cudabox matrix refresh` found: a readable diff, then overlay files.

Records are spliced into the target file in place (replaced by identity, or
inserted in version order), so comments and the layout of everything else
survive: a maintainer's `--into matrices/` gives a reviewable git diff, and a
user's hand-written overlay keeps its notes. The result is type-checked with
the loader and cross-checked before anything is written; files are replaced
atomically.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

from ... import paths
from .. import check as matrix_check
from .. import loader, overlay
from ..matrix import Matrix
from ...errors import CheckFailed, CudaboxError
from ...files import Node, Seq, display_path, load_yaml, read_input_text, write_atomic
from .reader import Change, Plan, plain

HEADER = ("# Written by `cudabox matrix refresh` from PyPI metadata (docs/refresh.md). Records here replace\n"
          "# the bundled records with the same identity; `status: inferred` marks carried facts.\n")

# --------------------------------------------------------------------------- the diff


def field_changes(old, new, path: str = "") -> list[tuple[str, object, object]]:
    """(dotted path, old, new) for every leaf that differs; lists of records are matched by name/version."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in dict.fromkeys([*old, *new]):
            out += field_changes(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    ident = _list_ident(old, new)
    if ident:
        olds = {str(r[ident]): r for r in old}
        news = {str(r[ident]): r for r in new}
        out = []
        for key in dict.fromkeys([*olds, *news]):
            out += field_changes(olds.get(key), news.get(key), f"{path}[{key}]")
        return out
    return [] if old == new else [(path, old, new)]


def _list_ident(old, new) -> str | None:
    if not (isinstance(old, list) and isinstance(new, list)) or not all(isinstance(r, dict) for r in old + new):
        return None
    return next((k for k in ("name", "version", "series") if all(k in r for r in old + new)), None)


def _short(value) -> str:
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(map(str, value)) or "[]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items() if k not in ("note", "source")) + "}"
    return "null" if value is None else str(value)


def render(plan: Plan) -> list[str]:
    """The diff as lines: `+ torch 2.16 (...)`, `~ cuDNN 9.26: builds[9.26.1.1]: null -> {...}`, notes."""
    lines = []
    for change in plan.changes:
        if change.old is None:
            lines.append(f"+ {change.label} ({change.summary})" if change.summary else f"+ {change.label}")
            continue
        lines.append(f"~ {change.label}" + (f" ({change.summary})" if change.summary else ""))
        for where, old, new in field_changes(change.old, change.new):
            if where.endswith(("source", "note")):
                continue
            lines.append(f"    {where}: {_short(old)} -> {_short(new)}")
    lines += [f"note: {n}" for n in plan.notes]
    return lines


def as_json(plan: Plan) -> dict:
    changes = [{"action": "add" if c.old is None else "change", "file": f"{c.subject}.yaml", "section": c.section,
                "id": c.ident, "label": c.label, "summary": c.summary,
                "fields": [{"path": w, "old": o, "new": n} for w, o, n in field_changes(c.old, c.new)] if c.old else [],
                "record": c.new} for c in plan.changes]
    return {"changes": changes, "notes": plan.notes}


# --------------------------------------------------------------------------- YAML in the bundled style


def scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if re.fullmatch(r"[A-Za-z_][\w.+/-]*", text) and yaml.safe_load(text) == text:
        return text
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def _flat(value) -> bool:
    return not isinstance(value, (dict, list)) or (
        isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)) or (
        isinstance(value, dict) and all(_flat(v) and not isinstance(v, dict) for v in value.values()))


def flow(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return scalar(value)


def item(record: dict, indent: int, style: dict | None = None) -> list[str]:
    """One record as a YAML list item at `indent`.

    `style` says how the record being replaced (or its neighbour) was laid out: "" -> itself on one
    line, KEY -> its KEY list's items on one line each. Without a hint: one line when short and flat.
    """
    style, pad = style or {}, " " * indent
    one = f"{pad}- {flow(record)}"
    if _flat(record) and (style[""] if "" in style else len(one) <= 120):
        return [one]
    lines = []
    for i, (key, value) in enumerate(record.items()):
        lead = f"{pad}- " if i == 0 else f"{pad}  "
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{lead}{scalar(key)}:")
            for sub in value:
                lines += item(sub, indent + 4, {"": style[key]} if key in style else None)
        elif isinstance(value, dict) and not _flat(value):
            lines.append(f"{lead}{scalar(key)}:")
            lines += [f"{pad}    {scalar(k)}: {flow(v)}" for k, v in value.items()]
        else:
            lines.append(f"{lead}{scalar(key)}: {flow(value)}")
    return lines


def style_of(lines: list[str], start: int, end: int) -> dict:
    """The layout of the record in lines[start:end], as `item` takes it."""
    style = {"": lines[start].lstrip().startswith("- {")}
    for i in range(start, end - 1):
        m = re.match(r"\s*(?:- )?([\w-]+):\s*$", lines[i])
        if m and lines[i + 1].lstrip().startswith("- "):
            style[m.group(1)] = lines[i + 1].lstrip().startswith("- {")
    return style


def document(sections: dict[str, list[dict]], header: bool = True) -> str:
    """A fresh overlay file with these sections ("releases", "companions.torchvision", ...)."""
    lines, parents = [HEADER.rstrip("\n")] if header else [], set()
    for dotted, records in sections.items():
        *heads, last = dotted.split(".")
        indent = 0
        for head in heads:
            if head not in parents:
                lines.append(f"{' ' * indent}{head}:")
                parents.add(head)
            indent += 2
        lines.append(f"{' ' * indent}{last}:")
        for record in records:
            lines += item(record, indent + 2)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- splicing into an existing file


def _order(ident) -> Version | None:
    try:
        return max(Version(str(v)) for v in ident) if isinstance(ident, (list, tuple)) else Version(str(ident))
    except (InvalidVersion, ValueError):
        return None


def _item_end(lines: list[str], start: int, stop: int) -> int:
    """The end (exclusive) of the item starting at `start`, before `stop`, without trailing blanks/comments."""
    end = stop
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return end


def _section_stop(lines: list[str], last_start: int, key_indent: int) -> int:
    for i in range(last_start + 1, len(lines)):
        text = lines[i]
        if text.strip() and not text.lstrip().startswith("#") and len(text) - len(text.lstrip()) <= key_indent:
            return i
    return len(lines)


def splice(text: str, changes: list[Change]) -> str | None:
    """Replace/insert the changes' records in `text`; None when its layout is not one we can edit in place."""
    doc = load_yaml(Path("overlay.yaml"), text) or Node()
    lines = text.splitlines()
    edits: list[tuple[int, int, list[str]]] = []
    appended: dict[str, list[dict]] = {}
    for dotted in dict.fromkeys(c.section for c in changes):
        ours = [c for c in changes if c.section == dotted]
        node, parent = doc, None
        for part in dotted.split("."):
            parent, node = node, node.get(part) if isinstance(node, dict) else None
        if node is None and parent is doc:
            appended[dotted] = [c.new for c in ours]
            continue
        if not isinstance(node, Seq) or not node:
            return None
        starts = [n - 1 for n in node.item_lines]
        if any(lines[s].lstrip()[:1] != "-" for s in starts):
            return None
        indent = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
        stop = _section_stop(lines, starts[-1], indent - 2 if indent >= 2 else 0)
        spans = [(s, _item_end(lines, s, (starts + [stop])[i + 1])) for i, s in enumerate(starts)]
        key = ours[0].key
        idents = [_ident(r, key) for r in node]
        ordered = [_order(i) for i in idents]
        descending = len(ordered) > 1 and None not in ordered and ordered[0] > ordered[-1]
        inserts: dict[int, list[dict]] = {}
        for change in ours:
            ident = _ident(change.new, key)
            if ident in idents:
                start, end = spans[idents.index(ident)]
                edits.append((start, end, item(change.new, indent, style_of(lines, start, end))))
                continue
            mine = _order(ident)
            at = next((spans[i][0] for i, o in enumerate(ordered)
                       if mine is not None and o is not None and (o < mine if descending else o > mine)), spans[-1][1])
            inserts.setdefault(at, []).append(change.new)
        model = style_of(lines, *spans[-1])  # new records look like their neighbours
        for at, records in inserts.items():
            records.sort(key=lambda r: _order(_ident(r, key)) or Version("0"), reverse=descending)
            edits.append((at, at, [line for r in records for line in item(r, indent, model)]))
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = new
    out = "\n".join(lines) + "\n"
    if appended:
        out += "\n" + document(appended, header=False)
    return out


def _ident(record, key):
    value = record.get(key)
    return tuple(value) if isinstance(value, list) else value


# --------------------------------------------------------------------------- writing


def target_dir(into: Path | None) -> Path:
    return Path(into) if into else paths.config_dir() / "matrices"


def current_docs(into: Path | None, project_dir: Path | None) -> dict:
    """What the refresh compares with: the bundled data and every other overlay (not the target: a
    refresh rewrites it, keeping only what differs from the rest), or the bundled files alone when
    writing into them."""
    if _into_overlay(into):
        return overlay.load_documents(project_dir, exclude=target_dir(into))
    return bundled_docs()


def _into_overlay(into: Path | None) -> bool:
    return into is None or Path(into).resolve() != paths.matrices_dir().resolve()


def bundled_docs() -> dict:
    bundled = paths.matrices_dir()
    docs = {}
    for subject in overlay.SUBJECTS:
        path = bundled / f"{subject}.yaml"
        docs[subject] = load_yaml(path)
        overlay.tag_origin(docs[subject], display_path(path))
    for subject in overlay.subjects(docs)[len(overlay.SUBJECTS):]:  # the frameworks frameworks.yaml declares
        path = bundled / f"{subject}.yaml"
        docs[subject] = load_yaml(path) if path.is_file() else Node()
        overlay.tag_origin(docs[subject], display_path(path))
    return docs


def run(client, frameworks, *, into: Path | None = None, project_dir: Path | None = None, dry_run: bool = False,
        progress=None):
    """The whole refresh: plan, render, validate, write. Returns (plan, diff lines, files written)."""
    from .plan import plan as make_plan
    from .prune import already_there, prune

    directory = target_dir(into)
    docs = current_docs(into, project_dir)
    result = make_plan(client, docs, frameworks, progress=progress)
    base, dropped = prune(directory, bundled_docs(), result, HEADER) if _into_overlay(into) else ({}, [])
    if _into_overlay(into):
        already_there(directory, result)  # after prune: what the plan re-derives is not stale
    texts = {**base, **new_texts(result, directory, base)}
    if texts:
        validate(texts, directory, current_docs(into, project_dir))
    written = [] if dry_run else write(texts, directory)
    lines = render(result) + [f"note: overlay {display_path(directory)}: dropped {d[2:]}" for d in dropped]
    return result, lines, written


def new_texts(plan: Plan, directory: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """subject -> the full new text of DIR/subject.yaml (`base`: texts to start from instead of the files)."""
    out = {}
    for subject in dict.fromkeys(c.subject for c in plan.changes):
        ours = [c for c in plan.changes if c.subject == subject]
        path = directory / f"{subject}.yaml"
        text = (base or {}).get(subject)
        if text is None:
            text = read_input_text(path) if path.is_file() else ""  # bounded
        spliced = splice(text, ours) if text.strip() else None
        if spliced is None and text.strip():  # a layout we can't edit in place: rewrite it, data kept
            merged = plain(load_yaml(path, text))
            for c in ours:
                records = merged
                for part in c.section.split("."):
                    records = records.setdefault(part, [] if part == c.section.split(".")[-1] else {})
                idx = next((i for i, r in enumerate(records) if _ident(r, c.key) == _ident(c.new, c.key)), None)
                records.__setitem__(idx, c.new) if idx is not None else records.append(c.new)
            spliced = HEADER + yaml.safe_dump(merged, sort_keys=False, width=120)
        if spliced is None:
            sections: dict[str, list[dict]] = {}
            for c in ours:
                sections.setdefault(c.section, []).append(c.new)
            spliced = document(sections)
        out[subject] = spliced
    return out


def validate(texts: dict[str, str], directory: Path, docs: dict) -> Matrix:
    """Type-check the matrix as it will be (loader errors are bugs here) and refuse new check errors."""
    before = matrix_check.check(_typed(docs)).errors
    merged = {k: v for k, v in docs.items()}
    for subject, text in texts.items():
        shown = display_path(directory / f"{subject}.yaml")
        over = load_yaml(Path(shown), text)
        overlay.tag_origin(over, shown)
        overlay.merge(merged[subject], over, subject, shown, overlay.identity(subject, merged))
    try:
        m = _typed(merged)
    except CudaboxError as exc:
        raise CheckFailed(f"refresh produced a record the loader rejects: {exc}; nothing written "
                          "(please report this)") from None
    new = [e for e in matrix_check.check(m).errors if e not in before]
    if new:
        raise CheckFailed(f"after this refresh `cudabox matrix check` would fail: {new[0]}"
                          + (f" (+{len(new) - 1} more)" if len(new) > 1 else "") + "; nothing written")
    return m


def _typed(docs: dict) -> Matrix:
    return loader.from_documents(docs)


def write(texts: dict[str, str], directory: Path) -> list[Path]:
    written = []
    for subject, text in texts.items():
        path = Path(directory) / f"{subject}.yaml"
        write_atomic(path, text)
        written.append(path)
    return written
