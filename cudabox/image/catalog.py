"""The curated image catalog: matrices/catalog.yaml -> resolved stacks -> images/<framework>/<tag>/.

Each catalog entry resolves exactly as `cudabox resolve --no-host` would (no
driver, no GPUs), and only its stack stage is rendered. The build context of
every catalog Dockerfile is images/ itself, so the smoke test is stored once,
in images/_support/. `generate` makes images/ match the catalog (atomic
writes; directories the catalog no longer lists are deleted); `check` says
how images/ differs from what `generate` would write (CI runs it).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import paths
from ..errors import CudaboxError, InputError, located
from ..files import Node, display_path, load_yaml, read_input, write_atomic
from ..knowledge.frameworks import PLAIN, Framework, Frameworks
from ..knowledge.values import FLAVOURS, python_spec
from .render import RenderOptions, render, smoke_source
from ..resolve.stack import Stack

CATALOG_FILE = "catalog.yaml"
SUPPORT_DIR = "_support"
OS_PYTHON = "os"  # catalog python value: the base image's own Python (the resolver's choice)


@dataclass(frozen=True)
class Entry:
    """One image the catalog asks for: a release, a variant, a Python, a flavour."""

    framework: str  # torch | tensorflow | jax | cuda
    version: str  # framework version, or the CUDA minor for plain stacks
    variant: str | None  # cu128 | and-cuda | cuda12 | None (plain CUDA)
    python: str | None  # "3.12", or None: the base's own Python
    flavour: str = "slim"
    extras: tuple[str, ...] = ()  # companions resolved with it (torchvision)
    where: str = CATALOG_FILE  # catalog.yaml:LINE, for messages
    allow_eol_images: bool = False  # publish on an end-of-life (not deleted) nvidia/cuda tag, said in the entry
    fw: Framework | None = field(default=None, compare=False)  # frameworks.yaml's record (None: plain CUDA)

    @property
    def label(self) -> str:
        what = f"CUDA {self.version}" if self.framework == PLAIN else f"{self.framework} {self.version}"
        detail = ", ".join(x for x in (self.variant, self.python and f"Python {self.python}",
                                       None if self.flavour == "slim" else self.flavour) if x)
        return f"{what} ({detail})" if detail else what

    def requirements(self) -> tuple[str, ...]:
        if self.fw is None:
            return tuple(self.extras)
        return (self.fw.selector(self.version, self.variant), *self.extras)

    @property
    def shows_variant(self) -> bool:
        return self.fw.tag_shows_variant(self.variant) if self.fw else bool(self.variant)


@dataclass(frozen=True)
class Image:
    entry: Entry
    stack: Stack

    @property
    def tag(self) -> str:
        """2.7.1-cu128-py3.12, 2.21.0-py3.12 (TensorFlow [and-cuda]), cuda-12.8-py3.11; -runtime/-devel if not slim."""
        e = self.entry
        parts = [f"cuda-{e.version}"] if e.framework == PLAIN else [e.version]
        if e.shows_variant:
            parts.append(e.variant)
        parts.append(f"py{self.stack.python}")
        if self.stack.flavour != "slim":
            parts.append(self.stack.flavour)
        return "-".join(parts)

    @property
    def path(self) -> str:
        return f"{self.entry.framework}/{self.tag}"


@dataclass
class Plan:
    """What `generate` would write: every file of images/, plus the entries that didn't resolve."""

    images: list[Image] = field(default_factory=list)
    failures: list[tuple[Entry, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path relative to images/ -> content
    order: tuple[str, ...] = ()  # the order of images/README.md: frameworks.yaml's, then plain CUDA
    unpinned: dict[str, str] = field(default_factory=dict)  # image path -> why its packages resolve in its build
    locked: list[str] = field(default_factory=list)  # image paths whose packages this plan locked anew


# --------------------------------------------------------------------------- catalog.yaml


def load_catalog(path: Path | None = None, frameworks: Frameworks | None = None) -> list[Entry]:
    """Read and validate matrices/catalog.yaml (errors point at file:line)."""
    from ..knowledge.loader import load_frameworks

    frameworks = frameworks if frameworks is not None else load_frameworks()
    keys = frameworks.listing
    path = Path(path) if path else paths.matrices_dir() / CATALOG_FILE
    shown = display_path(path)
    doc = load_yaml(path)
    if not isinstance(doc, Node):
        raise located(shown, None, "expected a mapping (see docs/images.md)")
    for key in doc:
        if key not in ("source", "defaults") + keys:
            raise located(shown, doc.line_of(key), f"unknown key '{key}'")
    if not doc.get("source"):
        raise located(shown, doc.line, "missing 'source' (whose publishing choice this is)")
    defaults = doc.get("defaults") or Node()
    entries = []
    for framework in keys:
        records = doc.get(framework) or []
        if not isinstance(records, list):
            raise located(shown, doc.line_of(framework), f"{framework}: expected a list")
        for i, rec in enumerate(records):
            line = records.line_of(i) if hasattr(records, "line_of") else None
            entries += _entries(framework, rec, defaults, shown, line, frameworks.get(framework))
    return entries


def _entries(framework: str, rec, defaults, shown: str, line, fw: Framework | None) -> list[Entry]:
    if not isinstance(rec, Node):
        raise located(shown, line, f"{framework}: expected a mapping")
    allowed = {"versions", "python", "flavour"} if framework == PLAIN else \
        {"version", "variants", "python", "flavour", "with", "allow_eol_images"}
    for key in rec:
        if key not in allowed:
            raise located(shown, rec.line_of(key), f"{framework}: unknown key '{key}' (known: {', '.join(sorted(allowed))})")

    def strings(key, default=None):
        value = rec.get(key, defaults.get(key, default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise located(shown, rec.line_of(key), f"{framework}: '{key}' must be a list of quoted strings")
        return value

    flavour = rec.get("flavour", defaults.get("flavour", "slim"))
    if flavour not in FLAVOURS:
        raise located(shown, rec.line_of("flavour"), f"{framework}: flavour {flavour!r}: expected one of {', '.join(FLAVOURS)}")
    pythons = strings("python", [OS_PYTHON]) or [OS_PYTHON]
    if framework == PLAIN:
        versions, variants, extras = strings("versions"), [None], ()
    else:
        if not isinstance(rec.get("version"), str):
            raise located(shown, rec.line_of("version"), f"{framework}: 'version' must be a quoted string")
        versions, variants, extras = [rec["version"]], strings("variants"), tuple(strings("with", []))
    eol = rec.get("allow_eol_images", False)
    if not isinstance(eol, bool):
        raise located(shown, rec.line_of("allow_eol_images"), f"{framework}: 'allow_eol_images' must be true or false")
    where = f"{shown}:{rec.line}"
    return [Entry(framework, version, variant, None if python == OS_PYTHON else python, flavour, extras, where,
                  allow_eol_images=eol, fw=fw)
            for version in versions for variant in variants for python in pythons]


# --------------------------------------------------------------------------- resolve + render


def catalog_matrix():
    """The bundled matrix only: a user's overlays must not change what cudabox publishes."""
    from ..knowledge.loader import load
    from ..knowledge.overlay import overlay_dirs

    overlays = overlay_dirs(None)
    if overlays:
        raise InputError(f"matrix overlays are active ({', '.join(map(str, overlays))}); the catalog is "
                         "generated from the bundled matrix only (unset CUDABOX_MATRICES / move the overlay)")
    return load(None)


def request_for(entry: Entry):
    from ..resolve.request import Request

    return Request(requirements=entry.requirements(),
                   python=python_spec(entry.python, what=entry.where) if entry.python else None,
                   cuda=f"=={entry.version}.*" if entry.framework == PLAIN else None, flavour=entry.flavour,
                   refuse_eol_images=not entry.allow_eol_images,  # the catalog publishes EOL tags only when an entry says so
                   context=("catalog image: resolved without a host (no driver or GPU constraint)",))


def plan(matrix=None, entries: list[Entry] | None = None, *, root: Path | None = None, lock: bool = False,
         upgrade: bool = False, progress=None) -> Plan:
    """Resolve every entry and render what images/ should hold.

    Packages: an image keeps the pins published in `root` (default: images/ of the checkout) while what
    they were resolved from is unchanged; `lock` pins the others (uv against their indexes, network), `upgrade`
    re-pins all. An image that can't be pinned is published unpinned (it resolves in its build) and
    `unpinned` says why."""
    from ..resolve.resolver import resolve

    m = matrix if matrix is not None else catalog_matrix()
    result = Plan(order=m.frameworks.listing)
    for entry in entries if entries is not None else load_catalog(frameworks=m.frameworks):
        if entry.fw is None and entry.framework != PLAIN:
            entry = replace(entry, fw=m.frameworks.get(entry.framework))
        try:
            image = Image(entry, resolve(m, request_for(entry)))
        except CudaboxError as exc:
            reasons = getattr(exc, "reasons", [])
            result.failures.append((entry, "; ".join([str(exc)] + list(reasons))))
            continue
        if image.path in {i.path for i in result.images}:
            raise InputError(f"{entry.where}: {entry.label} gives image {image.path} twice")
        result.images.append(image)
    from .catalog_pins import pin_images

    result.images = pin_images(result, Path(root) if root is not None else default_dir(),
                               lock=lock or upgrade, upgrade=upgrade, progress=progress)
    for image in result.images:
        result.files.update(_image_files(image, m))
    result.files[f"{SUPPORT_DIR}/smoke.py"] = smoke_source()
    result.files["README.md"] = index(result)
    return result


def _image_files(image: Image, m) -> dict[str, str]:
    opts = RenderOptions(support_dir=SUPPORT_DIR, expect_path=f"{image.path}/expect.json", stack_only=True,
                         pins_dir=image.path, title=f"cudabox {image.entry.framework} {image.tag}",
                         version=image.tag, regenerate="cudabox images generate")
    rendered = render(image.stack, options=opts)
    stack = dict(image.stack.to_dict(), stack_hash=image.stack.hash, image=f"{image.entry.framework}:{image.tag}")
    files = {rel: text for rel, text in rendered.files.items() if not rel.endswith(("smoke.py", "expect.json"))}
    return dict(files, **{f"{image.path}/Dockerfile": rendered.dockerfile,
                          f"{image.path}/expect.json": rendered.expect_json,
                          f"{image.path}/stack.json": json.dumps(stack, indent=2, sort_keys=True) + "\n"})


def index(result: Plan) -> str:
    """images/README.md: one table row per image."""
    lines = ["# cudabox image catalog", "",
             "Generated by `cudabox images generate` from `matrices/catalog.yaml`; do not edit "
             "(CI runs `cudabox images check`).",
             "Each directory holds the image's `Dockerfile` (the stack stage; its build context is this "
             "`images/` directory), `expect.json` (what the in-image smoke test checks), `stack.json` "
             "(the resolved stack, its locked packages and why) and, when its packages are locked, "
             "`stack-requirements.txt` (every file with its sha256; the uv installer's is in `_support/`). "
             "See docs/images.md.", "",
             "    docker buildx build -f images/FRAMEWORK/TAG/Dockerfile --target stack images/", "",
             "| image | framework | CUDA | cuDNN | Python | base | requirement | packages |",
             "|---|---|---|---|---|---|---|---|"]
    order = {f: i for i, f in enumerate(result.order)}
    for image in sorted(result.images, key=lambda i: order.get(i.entry.framework, len(order))):
        s = image.stack
        picks = ", ".join(f"{f.name} {f.version} ({f.variant})" for f in s.frameworks) or "plain CUDA"
        cells = [f"[`{image.entry.framework}:{image.tag}`]({image.path}/)", picks, s.cuda, s.cudnn or "—",
                 f"{s.python} ({s.python_install})", f"`{s.base_image}`", f"`{s.requirement}`",
                 f"{len(s.pins)} locked" if s.pins else "resolved in the build"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if result.failures:
        lines += ["", "Not generated (the matrix can't satisfy these catalog entries):", ""]
        lines += [f"- {entry.label}: {why}" for entry, why in result.failures]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- generate / check


def default_dir() -> Path:
    return paths.in_checkout("images", "--output DIR")


def _tag_prefix(entry: Entry) -> str:
    """The start of an entry's image path, known before it resolves (the Python may be the base's)."""
    parts = [f"cuda-{entry.version}"] if entry.framework == PLAIN else [entry.version]
    if entry.shows_variant:
        parts.append(entry.variant)
    parts.append(f"py{entry.python or ''}")
    return f"{entry.framework}/" + "-".join(parts)


def _owned(root: Path, result: Plan) -> dict[str, Path]:
    """Files generate owns: all under images/ except top-level dotfiles and the images of entries that
    failed to resolve (left as they are: a gap in the matrix must not delete a published image)."""
    kept = tuple(_tag_prefix(e) for e, _ in result.failures)
    out = {}
    if root.is_dir():
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and not rel.startswith(".") and not rel.startswith(kept):
                out[rel] = p
    return out


def _text(path: Path) -> str | None:
    """A generated file's text, read bounded; None when it can't be read (it then differs)."""
    try:
        return read_input(path).decode("utf-8", "replace")
    except CudaboxError:
        return None


def differences(root: Path, result: Plan) -> list[str]:
    """How root differs from what generate would write: 'modified: X', 'missing: X', 'extra: X'."""
    disk = _owned(Path(root), result)
    out = []
    for rel, content in sorted(result.files.items()):
        if rel not in disk:
            out.append(f"missing: {rel}")
        elif _text(disk[rel]) != content:
            out.append(f"modified: {rel}")
    out += [f"extra: {rel}" for rel in sorted(disk) if rel not in result.files]
    return out


def generate(root: Path, result: Plan) -> dict:
    """Make root match the plan: write changed files atomically, delete files and directories it no longer lists."""
    root = Path(root)
    written, deleted = [], []
    for rel, content in sorted(result.files.items()):
        path = root / rel
        if not path.is_file() or _text(path) != content:
            write_atomic(path, content)
            written.append(rel)
    for rel, path in _owned(root, result).items():
        if rel not in result.files:
            path.unlink()
            deleted.append(rel)
    for directory in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(directory.iterdir()):
            shutil.rmtree(directory)
    return {"written": written, "deleted": deleted}
