"""`cudabox matrix refresh`: learn framework releases from PyPI metadata the day they appear.

PyPI knows, per release, what the Linux x86_64 wheel pins (Requires-Dist) and
which Pythons it has wheels for; that is enough for the PyPI-default build of
torch, tensorflow[and-cuda], jax[cudaNN] and the torchvision/torchaudio pins.
What PyPI cannot know (the other torch variants and every arch list) comes
from download.pytorch.org when reachable, else it is carried from the
previous release and marked `status: inferred` with a note saying from where.

Here: release facts and the pure derivations from Requires-Dist, the Reader
(PyPI in parallel; the PyTorch index's page through `refresh_index`) and `plan()`. The per-framework steps that turn facts into
records in the YAML shapes of docs/matrices.md are in `refresh_torch` (torch,
companions), `refresh_frameworks` (tensorflow, jax, paddle) and `refresh_cuda` (cuDNN, CUDA);
`refresh_write` shows the diff and writes overlay files.
"""

from __future__ import annotations

import copy
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, canonicalize_version, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ...errors import EnvironmentProblem, InputError
from ..frameworks import template_regex
from ..overlay import section_at
from ..pypi import Client, Metadata
from .index import PYTORCH_INDEX, pytorch_pythons, pytorch_variants

_LINUX = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
          "python_version": "3.12", "python_full_version": "3.12.0", "implementation_name": "cpython",
          "platform_python_implementation": "CPython"}
_PLAIN = re.compile(r"\d+(\.\d+){0,4}")  # the matrix's version syntax (no .post/.dev/rc/+local)
_OPS = ("==", ">=", ">", "~=", "<=", "<", "!=")


def series_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def as_version(text) -> Version:
    return Version(str(text))


# --------------------------------------------------------------------------- facts from the project JSON


@dataclass
class Release:
    """One version of a PyPI project as /pypi/NAME/json lists it."""

    project: str
    version: str
    uploaded: str | None  # first upload, YYYY-MM-DD
    yanked: bool
    wheel: dict | None  # the Linux x86_64 wheel (else a pure-Python one) whose METADATA we read
    pythons: tuple[str, ...]  # CPython minors with a Linux x86_64 wheel (free-threaded builds left out)


def _linux_x86_64(platform: str) -> bool:
    return platform.endswith("_x86_64") and ("linux" in platform)


def releases(project: dict) -> dict[str, Release]:
    """Final releases (plain version numbers) that have a wheel cudabox can use."""
    name = project["info"]["name"]
    out = {}
    for version, files in (project.get("releases") or {}).items():
        if not files or not _PLAIN.fullmatch(version):
            continue
        linux, pure, pythons = [], [], set()
        for f in files:
            try:
                *_, tags = parse_wheel_filename(f["filename"])
            except (InvalidWheelFilename, InvalidVersion):
                continue
            if any(_linux_x86_64(t.platform) for t in tags):
                linux.append(f)
                pythons |= {f"{t.interpreter[2]}.{t.interpreter[3:]}" for t in tags
                            if re.fullmatch(r"cp3\d+", t.interpreter) and not t.abi.endswith("t")}
            elif all(t.platform == "any" for t in tags):
                pure.append(f)
        candidates = [f for f in linux + pure if not f.get("yanked")] or linux + pure
        if not candidates:
            continue
        dates = sorted(str(f.get("upload_time_iso_8601") or f.get("upload_time") or "") for f in files)
        out[version] = Release(name, version, dates[0][:10] or None, all(f.get("yanked") for f in files),
                               candidates[0], tuple(sorted(pythons, key=as_version)))
    return dict(sorted(out.items(), key=lambda kv: as_version(kv[0])))


# --------------------------------------------------------------------------- pure derivation from Requires-Dist


def requirements(requires_dist, extra: str | None = None) -> list[Requirement]:
    """The requirements that apply on Linux x86_64: plain ones, or (with `extra`) only that extra's."""
    out = []
    for text in requires_dist or ():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        plain = req.marker is None or req.marker.evaluate({**_LINUX, "extra": ""})
        if extra is None and plain:
            out.append(req)
        elif extra is not None and not plain and req.marker.evaluate({**_LINUX, "extra": extra}):
            out.append(req)
    return out


def spec_text(spec: SpecifierSet) -> str:
    """">=9.8,<10" the way the matrix spells specifiers: lower bound first, no trailing .0 on upper bounds."""
    parts = sorted(spec, key=lambda s: _OPS.index(s.operator) if s.operator in _OPS else 9)
    return ",".join(s.operator + (canonicalize_version(s.version) if s.operator in ("<", "<=") else s.version)
                    for s in parts)


def _exact(spec: SpecifierSet) -> str | None:
    items = list(spec)
    return items[0].version if len(items) == 1 and items[0].operator in ("==", "===") else None


def _floor(spec: SpecifierSet) -> str | None:
    """The lowest version a specifier allows, when it says (==X, >=X, ~=X)."""
    return next((s.version for s in spec if s.operator in ("==", "===", ">=", "~=")), None)


def _minor(version: str | None) -> str | None:
    return series_of(version) if version else None


def torch_pins(requires_dist) -> dict:
    """What the plain PyPI torch wheel pins: {variant: cu121, cuda: 12.1, cuda_runtime, cudnn} (None = bundles/none)."""
    runtime = cudnn = None
    for req in requirements(requires_dist):
        if re.fullmatch(r"nvidia-cudnn-cu\d+", req.name):
            cudnn = _exact(req.specifier)
        elif re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit", req.name):
            runtime = _exact(req.specifier)
    cuda = _minor(runtime)
    return {"variant": "cu" + cuda.replace(".", "") if cuda else None, "cuda": cuda,
            "cuda_runtime": runtime, "cudnn": cudnn}


def companion_pin(requires_dist) -> str | None:
    """torchvision/torchaudio's torch requirement ("==2.4.1"), None when it declares none."""
    req = next((r for r in requirements(requires_dist) if r.name == "torch"), None)
    return spec_text(req.specifier) if req and str(req.specifier) else None


def tf_and_cuda(requires_dist) -> dict | None:
    """tensorflow[and-cuda]'s CUDA runtime and cuDNN wheel pins, None before 2.14 (no such extra)."""
    out = {}
    for req in requirements(requires_dist, "and-cuda"):
        m = re.fullmatch(r"nvidia-(cuda-runtime|cudnn)-cu(\d+)", req.name)
        if m:
            out["cuda_major"] = int(m.group(2))
            out["cuda_runtime" if m.group(1) == "cuda-runtime" else "cudnn"] = spec_text(req.specifier)
    if "cudnn" not in out:
        return None
    return {"cuda_major": out["cuda_major"], "cuda_runtime": out.get("cuda_runtime"), "cudnn": out["cudnn"]}


@dataclass(frozen=True)
class PluginNames:
    """How a `plugins` framework (frameworks.yaml) names its CUDA extras and their PyPI projects:
    `extra` "cuda{major}", `package` "jax-cuda{major}-plugin"."""

    extra: str
    package: str

    def major(self, extra: str) -> int | None:
        """"cuda12" -> 12; None for another extra (cuda12_pip, cpu)."""
        m = re.fullmatch(template_regex(self.extra), extra)
        return int(m["major"]) if m and "major" in m.groupdict() else None

    def project(self, extra: str) -> str | None:
        major = self.major(extra)
        return None if major is None else self.package.format(major=major)

    def projects(self, majors) -> list[str]:
        """The plugin project of each CUDA major (cuda.yaml `majors`)."""
        return [self.package.format(major=m) for m in majors]


def framework_record(frameworks_doc, name: str) -> dict:
    """A framework's record in (merged) frameworks.yaml, {} when not declared."""
    return next((plain(r) for r in section_at(frameworks_doc, "frameworks") or ()
                 if isinstance(r, dict) and r.get("name") == name), {})


def plugin_names(frameworks_doc, name: str) -> PluginNames | None:
    """The extra and plugin package templates of a `plugins` framework; None when it declares no plugin_package."""
    rec = framework_record(frameworks_doc, name)
    return PluginNames(rec["extra"], rec["plugin_package"]) if rec.get("extra") and rec.get("plugin_package") \
        else None


def cuda_majors(cuda_doc) -> list[int]:
    return sorted(int(r["major"]) for r in section_at(cuda_doc, "majors") or () if isinstance(r, dict))


def jax_plugins(requires_dist, names: PluginNames) -> dict[str, SpecifierSet]:
    """jax's CUDA extras (`cuda12`) -> the plugin versions they require (`names`: frameworks.yaml's templates)."""
    out = {}
    for text in requires_dist or ():
        m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", text)
        project = names.project(m.group(1)) if m else None
        if project is None:
            continue
        for req in requirements([text], m.group(1)):
            if canonicalize_name(req.name) == canonicalize_name(project):
                out[m.group(1)] = req.specifier
    return out


def jax_plugin_pins(requires_dist, extra: str = "with-cuda") -> dict:
    """A jax-cudaNN-plugin's cuDNN range and the oldest CUDA runtime it accepts (its `with-cuda` extra;
    before jax 0.4.29 the nvidia-* pins sat in jax's own `cudaNN` extra: pass that extra with jax's metadata)."""
    cudnn = runtime = None
    for req in requirements(requires_dist, extra):
        if re.fullmatch(r"nvidia-cudnn-cu\d+", req.name):
            cudnn = spec_text(req.specifier)
        elif re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", req.name):
            runtime = _floor(req.specifier)
    return {"cudnn": cudnn, "cuda_min": _minor(runtime)}


# --------------------------------------------------------------------------- reading PyPI


class Reader:
    """Fetches what a refresh needs (project JSON, wheel METADATA in parallel) and remembers it."""

    def __init__(self, client: Client, progress=None, workers: int = 8):
        self.client, self.progress, self.workers = client, progress or (lambda text: None), workers
        self._projects: dict[str, dict] = {}
        self._releases: dict[str, dict[str, Release]] = {}
        self._meta: dict[tuple[str, str], Metadata] = {}
        self.notes: list[str] = []
        self._index: dict | None | bool = False
        self._index_reason, self._index_said = "", False
        self.index_pythons: dict[tuple[str, str], list[str]] = {}

    def project(self, name: str) -> dict:
        if name not in self._projects:
            self.progress(f"reading {self.client.project_url(name)}")
            self._projects[name] = self.client.project(name)
        return self._projects[name]

    def releases(self, name: str) -> dict[str, Release]:
        """Usable releases of a project; none (and a note) when PyPI has no such project (a future plugin)."""
        if name not in self._releases:
            try:
                self._releases[name] = releases(self.project(name))
            except InputError as exc:
                self.notes.append(str(exc))
                self._releases[name] = {}
        return self._releases[name]

    def prefetch(self, names) -> None:
        """Read several project JSONs at once (a cold refresh is mostly waiting on PyPI)."""
        todo = [n for n in dict.fromkeys(names) if n not in self._releases]
        with ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(self.releases, todo))

    def url(self, name: str) -> str:
        return self.client.project_url(name)

    def metadata(self, rels) -> dict[str, Metadata]:
        """METADATA of each release's wheel, by version (fetched in parallel, cached on disk)."""
        todo = [r for r in rels if (r.project, r.version) not in self._meta]
        done = 0

        def one(rel: Release):
            return rel, self.client.metadata(rel.project, rel.version, rel.wheel)

        if todo:
            with ThreadPoolExecutor(self.workers) as pool:
                for rel, meta in pool.map(one, todo):
                    self._meta[(rel.project, rel.version)] = meta
                    done += 1
                    self.progress(f"reading wheel metadata: {rel.project} {rel.version} ({done}/{len(todo)})")
        return {r.version: self._meta[(r.project, r.version)] for r in rels}

    def pytorch_index(self, say: bool = True) -> dict[str, set[str]] | None:
        """The PyTorch wheel index, or None when it can't be read: said once, by the first caller that needs it
        (`say`; checking existing records' variants does not)."""
        if self._index is False:
            self.progress(f"trying {PYTORCH_INDEX}")
            try:
                body = self.client.fetch(PYTORCH_INDEX, quick=True)
                self._index_reason = "HTTP 404"
            except EnvironmentProblem as exc:
                body, self._index_reason = None, getattr(exc, "reason", str(exc))
            html = body.decode("utf-8", "replace") if body else ""
            self._index = pytorch_variants(html) if body else None
            self.index_pythons = pytorch_pythons(html) if body else {}
        if self._index is None and say and not self._index_said:
            self._index_said = True
            self.notes.append(f"could not read {PYTORCH_INDEX} ({self._index_reason}): torch CUDA variants and "
                              "arch lists are carried from the previous release (status: inferred)")
        return self._index


# --------------------------------------------------------------------------- changes


@dataclass
class Change:
    """One record to add to or replace in a matrix file."""

    subject: str  # torch | tensorflow | jax | cudnn | cuda (the file)
    section: str  # releases | companions.torchvision | series | toolkits
    key: str  # the identity key (docs/matrices.md)
    new: dict
    old: dict | None = None
    summary: str = ""

    @property
    def ident(self):
        return self.new[self.key]

    @property
    def label(self) -> str:
        what = {"releases": self.subject, "series": "cuDNN", "toolkits": "CUDA"}.get(self.section)
        ident = "/".join(self.ident) if isinstance(self.ident, list) else self.ident
        return f"{what or self.section.split('.')[-1]} {ident}"


    def adds(self) -> list[str]:
        """The releases (versions) this change adds; [] for a change to what an existing record says."""
        if self.section in ("releases", "series"):
            field_ = "builds" if self.section == "series" else "versions"
            new = [b["version"] if isinstance(b, dict) else b for b in self.new.get(field_) or ()]
            old = {b["version"] if isinstance(b, dict) else b for b in (self.old or {}).get(field_) or ()}
            return [v for v in new if v not in old]
        if self.old is None:  # a companion or a CUDA toolkit minor
            return [self.ident]
        return []


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    uploaded: dict = field(default_factory=dict)  # (PyPI project, version) -> first upload date
    cudnn_projects: tuple[str, ...] = ()  # the nvidia-cudnn wheel of each CUDA major (cuda.yaml)

    def first_upload(self, change: Change, version: str) -> str | None:
        """When PyPI first published `version` of what `change` is about (None: unknown)."""
        projects = {"cudnn": self.cudnn_projects, "cuda": ("cuda-toolkit",)}.get(
            change.subject, (change.section.split(".")[-1] if "." in change.section else change.subject,))
        dates = [d for (name, v), d in self.uploaded.items() if d and name in projects
                 and (v == version or (change.subject == "cuda" and v.startswith(version + ".")))]
        return min(dates, default=None)

    def against(self, refreshed: str) -> tuple[list[Change], list[Change]]:
        """Split the changes at a refresh date: (missing: what PyPI had by then, or a correction of an
        existing record; newer: only releases PyPI published after it)."""
        missing, newer = [], []
        for change in self.changes:
            dates = [self.first_upload(change, v) for v in change.adds()]
            late = bool(dates) and all(d is not None and d > refreshed for d in dates)
            (newer if late else missing).append(change)
        return missing, newer


def section(doc: dict, dotted: str) -> list:
    """The record list at `dotted` ("releases", "companions.torchvision"), created when missing."""
    *heads, last = dotted.split(".")
    for head in heads:
        doc = doc.setdefault(head, {})
    if doc.get(last) is None:
        doc[last] = []
    return doc[last]


def plain(value):
    """Loader Nodes/Seqs -> plain dicts/lists (what the derivation and the writer handle)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class Planner:
    """Applies each change to a working copy, so later steps (companions, cuDNN, CUDA) see earlier ones."""

    def __init__(self, reader: Reader, docs: dict):
        self.r, self.work, self.plan = reader, {k: plain(v) for k, v in docs.items()}, Plan()

    def put(self, subject: str, sect: str, key: str, new: dict, old: dict | None, summary: str = "") -> None:
        if old is not None and old == new:
            return
        records = section(self.work[subject], sect)
        idx = next((i for i, r in enumerate(records) if r.get(key) == new[key]), None)
        if idx is None:
            records.append(new)
        else:
            records[idx] = new
        earlier = next((c for c in self.plan.changes if (c.subject, c.section, c.ident) == (subject, sect, new[key])),
                       None)
        if earlier:  # one change per record: the latest content, the original `old`
            earlier.new, earlier.summary = copy.deepcopy(new), "; ".join(filter(None, (earlier.summary, summary)))
            return
        self.plan.changes.append(Change(subject, sect, key, copy.deepcopy(new), old, summary))

    def note(self, text: str) -> None:
        self.plan.notes.append(text)


def projects_for(selected, docs: dict, cudnn_projects=(), projects=None) -> list[str]:
    """The PyPI projects a refresh of `selected` reads (cuDNN and CUDA are always followed);
    `projects`: framework -> its PyPI project where they differ (paddle -> paddlepaddle-gpu). A framework
    also brings what frameworks.yaml says it is read with: `python_from` (jax: jaxlib's wheel tags) and
    the `plugin_package` of every CUDA major cuda.yaml knows (jax-cuda12-plugin, jax-cuda13-plugin)."""
    names = []
    for name in selected:
        if name in ("cudnn", "cuda"):
            continue
        names.append((projects or {}).get(name, name))
        rec = framework_record(docs["frameworks"], name)
        if rec.get("python_from"):
            names.append(rec["python_from"])
        plugins = plugin_names(docs["frameworks"], name)
        if plugins:
            names += plugins.projects(cuda_majors(docs["cuda"]))
    return names + list(cudnn_projects) + ["cuda-toolkit"]


def newer_releases(client: Client, docs: dict, names=None) -> dict[str, list[Release]]:
    """Releases on PyPI newer than the newest the matrix knows, per framework (project JSON only: fast)."""
    from ..overlay import declared, pypi_project

    out = {}
    for name in names or [name for name, _, _ in declared(docs["frameworks"])]:
        project = pypi_project(docs["frameworks"], name)
        if project is None:  # one package per CUDA build (MXNet): no single release list
            continue
        known = [v for rec in plain(docs[name]).get("releases") or () for v in rec.get("versions") or ()]
        newest = max((as_version(v) for v in known), default=as_version("0"))
        out[name] = [r for r in releases(client.project(project)).values()
                     if as_version(r.version) > newest and not r.yanked]
    return out
