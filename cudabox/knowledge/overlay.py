"""The matrix documents: bundled matrices/*.yaml with user overlays merged in, record by record.

Overlays (user config dir, $CUDABOX_MATRICES, the project's .cudabox/matrices) replace bundled
records that share their identity key and add the rest; each node remembers its file for errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import paths
from ..errors import located
from ..files import Node, Seq, display_path, load_yaml

SUBJECTS = ("sources", "cuda", "drivers", "gpus", "cudnn", "torch", "tensorflow", "jax", "images")

# For each subject: list sections and the key that identifies a record, so that
# an overlay record replaces the bundled record with the same identity.
IDENTITY = {
    "sources": {"sources": None, "refresh": None},  # mappings: sources merged by key; refresh replaced
    "cuda": {"majors": "major", "toolkits": "version"},
    "drivers": {"branches": "branch"},
    "gpus": {"gpus": "name", "thresholds": None},
    "cudnn": {"series": "series"},
    "torch": {"releases": "series", "companions.torchvision": "version", "companions.torchaudio": "version"},
    "tensorflow": {"releases": "series"},
    "jax": {"releases": "versions"},
    "images": {"os": "os", "slim": "image", "nvidia_cuda": "cuda", "tools": "name"},
}


def overlay_dirs(project_dir: Path | None = None) -> list[Path]:
    """Overlay directories, lowest priority first: user config dir, $CUDABOX_MATRICES, the project."""
    dirs = [paths.config_dir() / "matrices"]
    dirs += [Path(p) for p in os.environ.get("CUDABOX_MATRICES", "").split(":") if p]
    if project_dir is not None:
        dirs.append(Path(project_dir) / ".cudabox" / "matrices")
    return [d for d in dirs if d.is_dir()]


def tag_origin(value, path: str):
    """Remember which file each record came from (overlays mix files)."""
    if isinstance(value, Node):
        value.origin_path = path
        for child in value.values():
            tag_origin(child, path)
    elif isinstance(value, Seq):
        for child in value:
            tag_origin(child, path)


def section_at(doc: Node, dotted: str):
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, Node) or part not in node:
            return None
        node = node[part]
    return node


def _identity(record, key):
    value = record.get(key) if isinstance(record, Node) else None
    return tuple(value) if isinstance(value, list) else value


def merge(base: Node, over: Node, subject: str, path: str) -> None:
    """Merge an overlay document into the bundled one, record by record."""
    for dotted, key in IDENTITY[subject].items():
        new = section_at(over, dotted)
        if new is None:
            continue
        parent = base
        *heads, last = dotted.split(".")
        for part in heads:
            parent = parent.setdefault(part, Node())
        old = parent.get(last)
        if key is None or old is None:
            if key is None and isinstance(old, Node) and isinstance(new, Node) and dotted == "sources":
                old.update(new)
            else:
                parent[last] = new
            continue
        if not isinstance(new, list):
            raise located(path, getattr(new, "line", None), f"'{dotted}' must be a list")
        index = {_identity(r, key): i for i, r in enumerate(old)}
        for record in new:
            ident = _identity(record, key)
            if ident in index:
                old[index[ident]] = record
            else:
                index[ident] = len(old)
                old.append(record)
    for top in over:
        if top not in {d.split(".")[0] for d in IDENTITY[subject]}:
            raise located(path, over.line_of(top), f"unknown section '{top}'")


def load_documents(project_dir: Path | None = None, bundled: Path | None = None) -> dict[str, Node]:
    """Read every subject file, merging overlays over the bundled data."""
    bundled = bundled or paths.matrices_dir()
    docs: dict[str, Node] = {}
    for subject in SUBJECTS:
        path = bundled / f"{subject}.yaml"
        doc = load_yaml(path)
        shown = display_path(path)
        if not isinstance(doc, Node):
            raise located(shown, None, "expected a mapping at the top level")
        tag_origin(doc, shown)
        docs[subject] = doc
    for directory in overlay_dirs(project_dir):
        for subject in SUBJECTS:
            path = directory / f"{subject}.yaml"
            if not path.exists():
                continue
            doc = load_yaml(path)
            shown = display_path(path)
            if doc is None:
                continue
            if not isinstance(doc, Node):
                raise located(shown, None, "expected a mapping at the top level")
            tag_origin(doc, shown)
            merge(docs[subject], doc, subject, shown)
    return docs

