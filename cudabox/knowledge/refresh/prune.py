"""An overlay holds only what differs from the bundled data (issue #11 §3).

An overlay record replaces the bundled record with the same identity. A copy that
adds nothing, or a record an earlier refresh derived that the bundled data now
has, would shadow the next bundled fix with a stale copy. So a refresh into an
overlay plans against the bundled data (and the other overlays) without the
target, and drops from the target: records equal to the bundled record, and
refresh-written records whose identity the bundled data now holds and the new
plan did not derive again. Hand-written records that differ are kept.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .. import overlay
from ...files import load_yaml, read_input_text
from .reader import Plan, plain

REFRESH_MARK = "`cudabox matrix refresh`"


def _ident(record: dict, key: str):
    value = record.get(key)
    return tuple(value) if isinstance(value, list) else value


def _by_refresh(record: dict, whole_file: bool) -> bool:
    return whole_file or REFRESH_MARK in str(record.get("note") or "")


def prune(directory: Path, bundled: dict, plan: Plan, header: str) -> tuple[dict[str, str], list[str]]:
    """subject -> the target overlay file's text without stale records; and one line per record dropped."""
    texts, dropped = {}, []
    planned = {(c.subject, c.section, _ident(c.new, c.key)) for c in plan.changes}
    for subject in overlay.subjects(bundled):
        path = Path(directory) / f"{subject}.yaml"
        if not path.is_file() or subject not in bundled:
            continue
        text = read_input_text(path)  # bounded
        doc = plain(load_yaml(path, text))
        if not isinstance(doc, dict):
            continue
        whole = text.startswith(header)
        changed = False
        for dotted, key in overlay.identity(subject, bundled).items():
            records, base = overlay.section_at(doc, dotted), overlay.section_at(plain(bundled[subject]), dotted)
            if key is None or not isinstance(records, list) or not isinstance(base, list):
                continue
            ours = {_ident(r, key): r for r in base if isinstance(r, dict)}
            keep = []
            for r in records:
                ident = _ident(r, key) if isinstance(r, dict) else None
                same = ident in ours and r == ours[ident]
                stale = ident in ours and _by_refresh(r, whole) and (subject, dotted, ident) not in planned
                if same or stale:
                    dropped.append(f"- {subject} {dotted} {ident}: "
                                   + ("same as the bundled record" if same else "the bundled data has it now"))
                    changed = True
                else:
                    keep.append(r)
            records[:] = keep
        if changed:
            texts[subject] = header + yaml.safe_dump(doc, sort_keys=False, width=120)
    return texts, dropped


def already_there(directory: Path, plan: Plan) -> None:
    """Drop planned changes the target overlay already holds verbatim (a second refresh finds nothing)."""
    cache: dict[str, dict] = {}

    def doc(subject: str) -> dict:
        if subject not in cache:
            path = Path(directory) / f"{subject}.yaml"
            cache[subject] = plain(load_yaml(path)) if path.is_file() else {}
        return cache[subject] if isinstance(cache[subject], dict) else {}

    def held(c) -> bool:
        records = overlay.section_at(doc(c.subject), c.section)
        return isinstance(records, list) and any(isinstance(r, dict) and r == c.new for r in records)

    plan.changes[:] = [c for c in plan.changes if not held(c)]
