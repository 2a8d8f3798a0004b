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

# The fixed subjects; each framework frameworks.yaml declares adds its own (matrices/<name>.yaml).
SUBJECTS = ("sources", "frameworks", "cuda", "drivers", "gpus", "cudnn", "images")

# For each subject: list sections and the key that identifies a record, so that
# an overlay record replaces the bundled record with the same identity.
IDENTITY = {
    "sources": {"sources": None, "refresh": None},  # mappings: sources merged by key; refresh replaced
    "frameworks": {"frameworks": "name", "frontends": "name"},
    "cuda": {"majors": "major", "libraries": "soname", "toolkits": "version"},
    "drivers": {"branches": "branch"},
    "gpus": {"gpus": "name", "thresholds": None},
    "cudnn": {"series": "series"},
    "images": {"os": "os", "slim": "image", "nvidia_cuda": "cuda", "tools": "name"},
}
# A framework's releases file, by the shape frameworks.yaml gives it.
SHAPE_IDENTITY = {"variants": {"releases": "series"}, "extra": {"releases": "series"},
                  "plugins": {"releases": "versions"}}


def declared(frameworks_doc) -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, shape, companions) of each framework the merged frameworks.yaml declares (unchecked:
    the loader reports bad records with their line)."""
    out = []
    for record in section_at(frameworks_doc, "frameworks") or ():
        if isinstance(record, dict) and isinstance(record.get("name"), str):  # Node or plain
            companions = record.get("companions") or ()
            out.append((record["name"], str(record.get("shape")),
                        tuple(c for c in companions if isinstance(c, str)) if isinstance(companions, list) else ()))
    return out


def pypi_project(frameworks_doc, name: str) -> str | None:
    """The PyPI project of a declared framework: its `package`, else its name; None when a template names
    one package per CUDA build (mxnet-cu{major}{minor}): no single project lists its releases."""
    for record in section_at(frameworks_doc, "frameworks") or ():
        if isinstance(record, dict) and record.get("name") == name:
            package = record.get("package")
            if isinstance(package, str):
                return None if "{" in package else package
            return name
    return name


def subjects(docs: dict) -> tuple[str, ...]:
    """Every subject of a set of documents: the fixed ones, then one per declared framework."""
    return SUBJECTS + tuple(name for name, _, _ in declared(docs["frameworks"]) if name not in SUBJECTS)


def identity(subject: str, docs: dict) -> dict:
    """The sections of one subject and the key that identifies their records."""
    if subject in IDENTITY:
        return IDENTITY[subject]
    for name, shape, companions in declared(docs["frameworks"]):
        if name == subject:
            return {**SHAPE_IDENTITY.get(shape, {"releases": "versions"}),
                    **{f"companions.{c}": "version" for c in companions}}
    raise KeyError(subject)


def overlay_dirs(project_dir: Path | None = None, exclude: Path | None = None) -> list[Path]:
    """Overlay directories, lowest priority first: user config dir, $CUDABOX_MATRICES, the project
    (`exclude`: one left out - what a refresh into that overlay compares with)."""
    dirs = [paths.config_dir() / "matrices"]
    dirs += [Path(p) for p in os.environ.get("CUDABOX_MATRICES", "").split(":") if p]
    if project_dir is not None:
        dirs.append(Path(project_dir) / ".cudabox" / "matrices")
    gone = Path(exclude).resolve() if exclude is not None else None
    return [d for d in dirs if d.is_dir() and d.resolve() != gone]


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
    """The value at `dotted` in a document (loader Nodes or plain dicts), None when absent."""
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _identity(record, key):
    value = record.get(key) if isinstance(record, Node) else None
    return tuple(value) if isinstance(value, list) else value


def merge(base: Node, over: Node, subject: str, path: str, ident: dict | None = None) -> None:
    """Merge an overlay document into the bundled one, record by record (`ident`: see `identity`)."""
    sections = ident if ident is not None else IDENTITY[subject]
    for dotted, key in sections.items():
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
        if top not in {d.split(".")[0] for d in sections}:
            raise located(path, over.line_of(top), f"unknown section '{top}'")


def load_documents(project_dir: Path | None = None, bundled: Path | None = None, *,
                   only_frameworks: bool = False, exclude: Path | None = None) -> dict[str, Node]:
    """Read every subject file, merging overlays over the bundled data.

    frameworks.yaml comes first (bundled, then overlays): it says which framework files exist.
    A framework only an overlay declares has no bundled file; its records come from overlays.
    """
    bundled = bundled or paths.matrices_dir()
    directories = overlay_dirs(project_dir, exclude)
    docs: dict[str, Node] = {}

    def read(path: Path) -> Node | None:
        doc = load_yaml(path)
        shown = display_path(path)
        if doc is None:
            return None
        if not isinstance(doc, Node):
            raise located(shown, None, "expected a mapping at the top level")
        tag_origin(doc, shown)
        return doc

    def merged(subject: str, fixed: bool) -> None:
        path = bundled / f"{subject}.yaml"
        if fixed or path.exists():
            docs[subject] = read(path)
            if docs[subject] is None:
                raise located(display_path(path), None, "expected a mapping at the top level")
        else:
            docs[subject] = Node()
            docs[subject].origin_path = display_path(path)
        for directory in directories:
            over = directory / f"{subject}.yaml"
            if over.exists():
                doc = read(over)
                if doc is not None:
                    merge(docs[subject], doc, subject, display_path(over), identity(subject, docs))

    merged("frameworks", True)
    if only_frameworks:
        return docs
    for subject in subjects(docs):
        if subject != "frameworks":
            merged(subject, subject in SUBJECTS)
    return docs
