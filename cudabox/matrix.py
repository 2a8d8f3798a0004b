"""Load the compatibility matrix: matrices/*.yaml plus user overlays -> one typed `Matrix`.

The YAML is checked against the schema in docs/matrices.md as it is read;
a broken file fails with `matrices/torch.yaml:123: what is wrong` (exit 2).
Cross-file consistency (each pin points at a known cuDNN, ...) is
`cudabox.matrix_check`'s job.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from . import paths
from .errors import InputError, located
from .files import Node, Seq, display_path, load_yaml
from .model import (
    GPU,
    GPU_CLASSES,
    IMAGE_STATUSES,
    ArchList,
    Build,
    Companion,
    CudaImage,
    CudaMajor,
    CudaRelease,
    CudnnBuild,
    CudnnSeries,
    DriverBranch,
    DriverVersion,
    FrameworkRelease,
    OSInfo,
    Provenance,
    PythonSupport,
    SlimBase,
    Source,
    Thresholds,
    Tool,
    Toolkit,
    cc_tuple,
    cuda_version,
    parse_arch,
)

SUBJECTS = ("sources", "cuda", "drivers", "gpus", "cudnn", "torch", "tensorflow", "jax", "images")

# For each subject: list sections and the key that identifies a record, so that
# an overlay record replaces the bundled record with the same identity.
IDENTITY = {
    "sources": {"sources": None},  # a mapping: merged by key
    "cuda": {"majors": "major", "toolkits": "version"},
    "drivers": {"branches": "branch"},
    "gpus": {"gpus": "name", "thresholds": None},
    "cudnn": {"series": "series"},
    "torch": {"releases": "series", "companions.torchvision": "version", "companions.torchaudio": "version"},
    "tensorflow": {"releases": "series"},
    "jax": {"releases": "versions"},
    "images": {"os": "os", "slim": "image", "nvidia_cuda": "cuda", "tools": "name"},
}

STATUSES = ("verified", "unverified", "inferred")

# --------------------------------------------------------------------------- field readers


def _str(v):
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ValueError("expected a string")
    return str(v)


def _version(v):
    if isinstance(v, float):
        raise ValueError(f"write versions as quoted strings (YAML read {v!r} as a number)")
    s = _str(v)
    if not re.fullmatch(r"\d+(\.\d+){0,4}", s):
        raise ValueError(f"not a version: {s!r}")
    return s


def _minor(v):
    s = _version(v)
    if s.count(".") != 1:
        raise ValueError(f"expected major.minor, got {s!r}")
    return s


def _cc(v):
    s = _minor(v)
    cc_tuple(s)
    return s


def _driver(v):
    if v is None:
        return None
    if isinstance(v, float):
        raise ValueError(f"quote driver versions (YAML read {v!r} as a number)")
    return DriverVersion.parse(_str(v))


def _int(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("expected an integer")
    return v


def _number(v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("expected a number or null")
    return float(v)


def _list(kind):
    def read(v):
        if not isinstance(v, list):
            raise ValueError("expected a list")
        return tuple(kind(x) for x in v)

    return read


def _arch(prefix):
    def read(v):
        s = _str(v)
        if parse_arch(s)[0] != prefix:
            raise ValueError(f"expected a {prefix}_XY target, got {s!r}")
        return s

    return read


def _specifier(v):
    s = _str(v)
    try:
        SpecifierSet(s)
    except InvalidSpecifier:
        raise ValueError(f"not a version specifier: {s!r}") from None
    return s


def _pin(v):
    """An exact version ("9.1.0.70") or a specifier (">=9.8,<10"), normalised to a specifier."""
    if v is None:
        return None
    s = _str(v)
    return _specifier(s if s[0] in "=<>!~" else f"=={s}")


def _python(v):
    if isinstance(v, list):
        return PythonSupport(versions=tuple(_minor(x) for x in v))
    return PythonSupport(spec=_specifier(v))


def _choice(*options):
    def read(v):
        s = _str(v)
        if s not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {s!r}")
        return s

    return read


def _cuda_ranges(v):
    if v is None:
        return None
    out = []
    for item in _list(_str)(v):
        lo, _, hi = item.partition("-")
        out.append((_minor(lo), _minor(hi or lo)))
    return tuple(out)


def _optional(kind):
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
        source = self.get("source", lambda v: _list(_str)(v) if isinstance(v, list) else (_str(v),))
        if not source or not all(source):
            raise self.error("source", f"{self.what}: 'source' must name a source")
        return Provenance(
            source=source,
            status=self.get("status", _choice(*STATUSES), "verified"),
            note=self.get("note", _str, None),
            origin=f"{self.path}:{self.node.line}",
        )

    def done(self):
        unknown = [k for k in self.node if k not in self.used]
        if unknown:
            raise self.error(unknown[0], f"{self.what}: unknown key '{unknown[0]}'")
        return self


# --------------------------------------------------------------------------- loading + overlays


def overlay_dirs(project_dir: Path | None = None) -> list[Path]:
    """Overlay directories, lowest priority first: user config dir, $CUDABOX_MATRICES, the project."""
    dirs = [paths.config_dir() / "matrices"]
    dirs += [Path(p) for p in os.environ.get("CUDABOX_MATRICES", "").split(":") if p]
    if project_dir is not None:
        dirs.append(Path(project_dir) / ".cudabox" / "matrices")
    return [d for d in dirs if d.is_dir()]


def _tag_origin(value, path: str):
    """Remember which file each record came from (overlays mix files)."""
    if isinstance(value, Node):
        value.origin_path = path
        for child in value.values():
            _tag_origin(child, path)
    elif isinstance(value, Seq):
        for child in value:
            _tag_origin(child, path)


def _section(doc: Node, dotted: str):
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, Node) or part not in node:
            return None
        node = node[part]
    return node


def _identity(record, key):
    value = record.get(key) if isinstance(record, Node) else None
    return tuple(value) if isinstance(value, list) else value


def _merge(base: Node, over: Node, subject: str, path: str) -> None:
    """Merge an overlay document into the bundled one, record by record."""
    for dotted, key in IDENTITY[subject].items():
        new = _section(over, dotted)
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
        _tag_origin(doc, shown)
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
            _tag_origin(doc, shown)
            _merge(docs[subject], doc, subject, shown)
    return docs


def _records(doc: Node, dotted: str, subject_path: str):
    section = _section(doc, dotted)
    if section is None:
        return []
    if not isinstance(section, list):
        raise located(subject_path, getattr(section, "line", None), f"'{dotted}' must be a list")
    return section


def _rec(node, what) -> Record:
    path = getattr(node, "origin_path", "matrices")
    return Record(node, path, what)


# --------------------------------------------------------------------------- the Matrix


@dataclass
class Matrix:
    """Every fact cudabox knows, typed and indexed."""

    sources: dict[str, Source] = field(default_factory=dict)
    majors: dict[int, CudaMajor] = field(default_factory=dict)
    toolkits: list[Toolkit] = field(default_factory=list)  # oldest first
    branches: list[DriverBranch] = field(default_factory=list)  # oldest first
    gpus: list[GPU] = field(default_factory=list)
    thresholds: Thresholds | None = None
    cudnn: list[CudnnSeries] = field(default_factory=list)
    releases: list[FrameworkRelease] = field(default_factory=list)
    builds: list[Build] = field(default_factory=list)  # newest version first within a framework
    companions: list[Companion] = field(default_factory=list)
    os_info: dict[str, OSInfo] = field(default_factory=dict)
    slim: list[SlimBase] = field(default_factory=list)
    cuda_images: list[CudaImage] = field(default_factory=list)  # oldest first
    tools: dict[str, Tool] = field(default_factory=dict)  # build tools pinned for image builds (uv)

    # ---- CUDA and drivers

    def toolkit(self, minor: str) -> Toolkit | None:
        return self._toolkits.get(minor)

    @cached_property
    def _toolkits(self) -> dict[str, Toolkit]:
        return {t.version: t for t in self.toolkits}

    def driver_cuda(self, driver: DriverVersion) -> str | None:
        """The CUDA version a driver runs natively (what nvidia-smi prints), from its branch."""
        best = None
        for b in self.branches:
            if b.branch <= driver.branch:
                best = b
        return best.cuda if best else None

    def runs_natively(self, driver: DriverVersion, minor: str) -> bool:
        """Driver's own CUDA >= minor, and at least the toolkit's GA driver when known."""
        native = self.driver_cuda(driver)
        if native is None or cuda_version(native) < cuda_version(minor):
            return False
        tk = self.toolkit(minor)
        floor = tk.min_driver if tk else None
        return floor is None or driver >= floor

    def minor_compatible(self, driver: DriverVersion, minor: str) -> bool:
        """Minor-version compatibility: any driver >= the major's floor runs any X.y (limited: no PTX JIT)."""
        major = self.majors.get(int(minor.split(".")[0]))
        return major is not None and driver >= major.minor_compat_driver

    # ---- GPUs

    @cached_property
    def _gpu_index(self) -> dict[str, GPU]:
        index = {}
        for gpu in self.gpus:
            for name in (gpu.name, *gpu.aliases):
                index.setdefault(normalize_gpu_name(name), gpu)
        return index

    def find_gpu(self, name: str) -> GPU | None:
        return self._gpu_index.get(normalize_gpu_name(name))

    def gpu(self, name: str, *, where: str = "GPU") -> GPU:
        """Resolve a GPU name, alias, `sm_89` or `8.9`; unknown -> InputError with close matches."""
        text = str(name).strip()
        found = self.find_gpu(text)
        if found:
            return found
        cc = _cc_from_text(text)
        if cc:
            same = [g for g in self.gpus if g.cc == cc]
            return GPU(
                name=f"compute capability {cc}", cc=cc, arch=same[0].arch if same else "unknown",
                gpu_class="unknown", memory_gb=None, peak_fp16_tflops=None, peak_bandwidth_gbs=None,
                aliases=(), prov=Provenance(source=("user input",)),
            )
        keys = list(self._gpu_index)
        close = difflib.get_close_matches(normalize_gpu_name(text), keys, n=3, cutoff=0.5)
        names = []
        for key in close:
            g = self._gpu_index[key]
            if g.name not in names:
                names.append(g.name)
        hint = f"did you mean: {', '.join(names)}?" if names else "see `cudabox matrix show gpus`"
        raise InputError(f"{where}: unknown GPU {text!r}; {hint}")

    # ---- frameworks

    def builds_of(self, framework: str) -> list[Build]:
        return [b for b in self.builds if b.framework == framework]

    def companions_of(self, name: str) -> list[Companion]:
        return [c for c in self.companions if c.name == name]

    @cached_property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.framework for b in self.builds))

    def cudnn_series(self, version: str) -> CudnnSeries | None:
        parts = version.split(".")
        return next((s for s in self.cudnn if s.series == ".".join(parts[:2])), None)

    def cudnn_builds(self) -> list[CudnnBuild]:
        return sorted((b for s in self.cudnn for b in s.builds), key=lambda b: Version(b.version))

    def image(self, cuda: str) -> CudaImage | None:
        return next((i for i in self.cuda_images if i.cuda == cuda), None)

    @cached_property
    def known_pythons(self) -> tuple[str, ...]:
        """Every Python minor named anywhere in the data, oldest first."""
        seen = {p for b in self.builds for p in b.python.versions}
        seen |= {o.python for o in self.os_info.values()}
        return tuple(sorted(seen, key=Version))


def normalize_gpu_name(name: str) -> str:
    """ "NVIDIA GeForce RTX 2080 Ti" -> "rtx2080ti"; "Tesla V100-SXM2-32GB" -> "v100sxm232gb"."""
    text = str(name).lower()
    text = re.sub(r"\b(nvidia|tesla|geforce)\b", " ", text)
    return re.sub(r"[^a-z0-9]", "", text)


def _cc_from_text(text: str) -> str | None:
    m = re.fullmatch(r"sm_?(\d+)(\d)", text.strip().lower())
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    m = re.fullmatch(r"(\d{1,2})\.(\d)", text.strip())
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    return None


# --------------------------------------------------------------------------- building the Matrix


def _read_sources(doc, m: Matrix):
    section = doc.get("sources") or Node()
    for key, node in section.items():
        r = _rec(node, f"source {key}")
        url = r.get("url", _str)
        m.sources[str(key)] = Source(
            key=str(key), url=url, title=r.get("title", _str, ""),
            strength=r.get("strength", _choice("P", "P-copy", "S", "UNVERIFIED")),
            prov=Provenance(source=(url,), note=r.get("note", _str, None), origin=f"{r.path}:{node.line}"),
        )
        r.done()


def _read_cuda(doc, m: Matrix):
    for node in _records(doc, "majors", "cuda.yaml"):
        r = _rec(node, "CUDA major")
        major = CudaMajor(
            major=r.get("major", _int), minor_compat_driver=r.get("minor_compat_driver", _driver),
            wheel_suffix=r.get("wheel_suffix", lambda v: "" if v is None else _str(v)),
            cudnn_wheel=r.get("cudnn_wheel", _str), prov=r.prov(),
        )
        r.done()
        m.majors[major.major] = major
    for node in _records(doc, "toolkits", "cuda.yaml"):
        r = _rec(node, "toolkit")
        version = r.get("version", _minor)
        releases = []
        for rel in r.get("releases", _list(lambda x: x)):
            rr = _rec(rel, f"CUDA {version} release")
            releases.append(CudaRelease(
                version=rr.get("version", _version), label=rr.get("label", _str, ""),
                driver=rr.get("driver", _driver), prov=rr.prov()))
            rr.done()
        m.toolkits.append(Toolkit(version=version, sass=r.get("sass", _list(_arch("sm"))),
                                  releases=tuple(releases), prov=r.prov()))
        r.done()
    m.toolkits.sort(key=lambda t: t.key)


def _read_drivers(doc, m: Matrix):
    for node in _records(doc, "branches", "drivers.yaml"):
        r = _rec(node, "driver branch")
        m.branches.append(DriverBranch(branch=r.get("branch", _int), cuda=r.get("cuda", _minor), prov=r.prov()))
        r.done()
    m.branches.sort(key=lambda b: b.branch)


def _read_gpus(doc, m: Matrix):
    if "thresholds" in doc:
        r = _rec(doc["thresholds"], "thresholds")
        m.thresholds = Thresholds(gemm_pass=r.get("gemm_pass", _number),
                                  bandwidth_pass=r.get("bandwidth_pass", _number), prov=r.prov())
        r.done()
    for node in _records(doc, "gpus", "gpus.yaml"):
        r = _rec(node, "GPU")
        m.gpus.append(GPU(
            name=r.get("name", _str), cc=r.get("cc", _cc), arch=r.get("arch", _str),
            gpu_class=r.get("class", _choice(*GPU_CLASSES)), memory_gb=r.get("memory_gb", _number, None),
            peak_fp16_tflops=r.get("peak_fp16_tflops", _number, None),
            peak_bandwidth_gbs=r.get("peak_bandwidth_gbs", _number, None),
            aliases=r.get("aliases", _list(_str), ()), prov=r.prov()))
        r.done()


def _read_cudnn(doc, m: Matrix):
    for node in _records(doc, "series", "cudnn.yaml"):
        r = _rec(node, "cuDNN series")
        series = r.get("series", _minor)
        builds = []
        for b in r.get("builds", _list(lambda x: x), ()):
            br = _rec(b, f"cuDNN {series} build")
            builds.append(CudnnBuild(version=br.get("version", _version),
                                     wheels=br.get("wheels", _list(_choice("cu11", "cu12", "cu13")), ())))
            br.done()
        m.cudnn.append(CudnnSeries(series=series, cuda=r.get("cuda", _cuda_ranges, None),
                                   min_cc=r.get("min_cc", _optional(_cc), None), builds=tuple(builds),
                                   prov=r.prov()))
        r.done()
    m.cudnn.sort(key=lambda s: Version(s.series))


def _merge_prov(*provs: Provenance) -> Provenance:
    status = "verified"
    for p in provs:
        if p.status == "inferred" or (p.status == "unverified" and status == "verified"):
            status = p.status
    sources = tuple(dict.fromkeys(s for p in provs for s in p.source))
    notes = "; ".join(p.note for p in provs if p.note) or None
    return Provenance(source=sources, status=status, note=notes, origin=provs[-1].origin)


def _read_torch(doc, m: Matrix):
    for node in _records(doc, "releases", "torch.yaml"):
        r = _rec(node, "torch release")
        series = r.get("series", _minor)
        versions = r.get("versions", _list(_version))
        python = r.get("python", _python)
        default = r.get("pypi_default", _optional(_str), None)
        pypi = r.get("pypi", lambda x: x, None)
        pypi_runtime = None
        if pypi is not None:
            pr = _rec(pypi, f"torch {series} pypi")
            pypi_runtime = pr.get("cuda_runtime", _optional(_version), None)
            pr.get("cudnn", _optional(_version), None)
            pr.prov()
            pr.done()
        prov = r.prov()
        variants = []
        for vnode in r.get("variants", _list(lambda x: x)):
            vr = _rec(vnode, f"torch {series} variant")
            variants.append(dict(
                name=vr.get("name", _str), cuda=vr.get("cuda", _minor), cudnn=vr.get("cudnn", _pin, None),
                index=vr.get("index", _optional(_str), None), sass=vr.get("sass", _list(_arch("sm")), ()),
                ptx=vr.get("ptx", _list(_arch("compute")), ()), prov=vr.prov()))
            vr.done()
        r.done()
        if default is not None and default not in {v["name"] for v in variants}:
            raise r.error("pypi_default", f"torch {series}: pypi_default {default!r} is not one of its variants")
        m.releases.append(FrameworkRelease(
            "torch", series, versions, python,
            "; ".join(f"{v['name']}{' (PyPI)' if v['name'] == default else ''}" for v in variants), prov))
        for version in versions:
            for v in variants:
                is_default = v["name"] == default
                m.builds.append(Build(
                    framework="torch", version=version, variant=v["name"], cuda=v["cuda"], cuda_min=None,
                    cudnn=v["cudnn"], cuda_runtime=f"=={pypi_runtime}" if is_default and pypi_runtime else None,
                    python=python, arch=ArchList(sass=v["sass"], ptx=v["ptx"]), wheels_cuda=True,
                    system_cudnn=None, pypi_default=is_default, index=None if is_default else v["index"],
                    requirement=f"torch=={version}" if is_default else f"torch=={version}+{v['name']}",
                    prov=_merge_prov(prov, v["prov"])))
    companions = doc.get("companions") or Node()
    for name in ("torchvision", "torchaudio"):
        for node in _records(doc, f"companions.{name}", "torch.yaml"):
            r = _rec(node, name)
            m.companions.append(Companion(name=name, version=r.get("version", _version),
                                          torch=r.get("torch", _optional(_specifier), None), prov=r.prov()))
            r.done()
    for key in companions:
        if key not in ("torchvision", "torchaudio"):
            raise located(companions.origin_path, companions.line_of(key), f"unknown companion '{key}'")


def _read_tensorflow(doc, m: Matrix):
    for node in _records(doc, "releases", "tensorflow.yaml"):
        r = _rec(node, "tensorflow release")
        series = r.get("series", _minor)
        versions = r.get("versions", _list(_version))
        python = r.get("python", _python)
        cuda = r.get("cuda", _minor)
        cudnn_series = r.get("cudnn", _minor)
        and_cuda = r.get("and_cuda", lambda x: x, None)
        arch = ArchList(sass=r.get("sass", _list(_arch("sm")), ()), ptx=r.get("ptx", _list(_arch("compute")), ()))
        prov = r.prov()
        r.done()
        pins = None
        if and_cuda is not None:
            ar = _rec(and_cuda, f"tensorflow {series} and_cuda")
            pins = dict(major=ar.get("cuda_major", _int), runtime=ar.get("cuda_runtime", _pin, None),
                        cudnn=ar.get("cudnn", _pin, None), prov=ar.prov())
            ar.done()
        m.releases.append(FrameworkRelease(
            "tensorflow", series, versions, python,
            f"CUDA {cuda}, cuDNN {cudnn_series}" + (" (wheels: [and-cuda])" if pins else " (system CUDA)"), prov))
        for version in versions:
            if pins:
                # [and-cuda] pins a CUDA major; the runtime wheel pin says which minor
                m.builds.append(Build(
                    framework="tensorflow", version=version, variant="and-cuda", cuda=cuda, cuda_min=None,
                    cudnn=pins["cudnn"], cuda_runtime=pins["runtime"], python=python, arch=arch,
                    wheels_cuda=True, system_cudnn=None, pypi_default=True, index=None,
                    requirement=f"tensorflow[and-cuda]=={version}", prov=_merge_prov(prov, pins["prov"])))
            else:
                m.builds.append(Build(
                    framework="tensorflow", version=version, variant="system", cuda=cuda, cuda_min=cuda,
                    cudnn=None, cuda_runtime=None, python=python, arch=arch, wheels_cuda=False,
                    system_cudnn=cudnn_series, pypi_default=True, index=None,
                    requirement=f"tensorflow=={version}", prov=prov))


def _read_jax(doc, m: Matrix):
    for node in _records(doc, "releases", "jax.yaml"):
        r = _rec(node, "jax release")
        versions = r.get("versions", _list(_version))
        python = r.get("python", _python)
        prov = r.prov()
        plugins = []
        for pnode in r.get("plugins", _list(lambda x: x)):
            pr = _rec(pnode, f"jax {versions[0]} plugin")
            plugins.append(dict(
                name=pr.get("name", _str), major=pr.get("cuda_major", _int),
                cuda=pr.get("cuda", _optional(_minor), None), cuda_min=pr.get("cuda_min", _minor),
                cudnn=pr.get("cudnn", _pin, None), min_cc=pr.get("min_cc", _optional(_cc), None),
                prov=pr.prov()))
            pr.done()
        r.done()
        series = ".".join(versions[0].split(".")[:2])
        m.releases.append(FrameworkRelease(
            "jax", series, versions, python,
            "; ".join(f"jax[{p['name']}] cuDNN {p['cudnn'] or '-'}" for p in plugins), prov))
        for version in versions:
            for p in plugins:
                m.builds.append(Build(
                    framework="jax", version=version, variant=p["name"], cuda=p["cuda"] or p["cuda_min"],
                    cuda_min=p["cuda_min"], cudnn=p["cudnn"], cuda_runtime=None, python=python,
                    arch=ArchList(min_cc=p["min_cc"]), wheels_cuda=True, system_cudnn=None,
                    pypi_default=p["major"] == 12, index=None, requirement=f"jax[{p['name']}]=={version}",
                    prov=_merge_prov(prov, p["prov"])))


def _read_images(doc, m: Matrix):
    for node in _records(doc, "os", "images.yaml"):
        r = _rec(node, "OS")
        info = OSInfo(os=r.get("os", _str), python=r.get("python", _minor), prov=r.prov())
        r.done()
        m.os_info[info.os] = info
    for node in _records(doc, "tools", "images.yaml"):
        r = _rec(node, "tool")
        tool = Tool(name=r.get("name", _str), version=r.get("version", _version), prov=r.prov())
        r.done()
        m.tools[tool.name] = tool
    for node in _records(doc, "slim", "images.yaml"):
        r = _rec(node, "slim base")
        m.slim.append(SlimBase(image=r.get("image", _str), os=r.get("os", _str), prov=r.prov()))
        r.done()
    for node in _records(doc, "nvidia_cuda", "images.yaml"):
        r = _rec(node, "nvidia/cuda image")
        lifecycle = r.get("status", _choice(*IMAGE_STATUSES))
        image = CudaImage(
            cuda=r.get("cuda", _version), lifecycle=lifecycle, require=r.get("require", _optional(_str), None),
            cudnn=r.get("cudnn", _optional(_version), None),
            cudnn_prefix=r.get("cudnn_prefix", _optional(_choice("cudnn8", "cudnn9", "cudnn")), None),
            os=r.get("os", _list(_str)), cudnn_os=r.get("cudnn_os", _list(_str), ()),
            prov=Provenance(source=r.get("source", lambda v: _list(_str)(v) if isinstance(v, list) else (_str(v),)),
                            note=r.get("note", _str, None), origin=f"{r.path}:{node.line}"))
        r.done()
        m.cuda_images.append(image)
    m.cuda_images.sort(key=lambda i: cuda_version(i.cuda))


def _sort_builds(m: Matrix):
    order = {"torch": 0, "tensorflow": 1, "jax": 2}
    # later records (overlays) win for the same framework/version/variant
    unique = {}
    for b in m.builds:
        unique[(b.framework, b.version, b.variant)] = b
    m.builds = sorted(unique.values(), key=lambda b: (order.get(b.framework, 9), _neg(b.version), b.variant))


def _neg(version: str):
    return tuple(-p for p in Version(version).release)


def load(project_dir: Path | None = None, *, bundled: Path | None = None) -> Matrix:
    """Load and type-check the whole matrix (bundled data + overlays)."""
    docs = load_documents(project_dir, bundled)
    m = Matrix()
    _read_sources(docs["sources"], m)
    _read_cuda(docs["cuda"], m)
    _read_drivers(docs["drivers"], m)
    _read_gpus(docs["gpus"], m)
    _read_cudnn(docs["cudnn"], m)
    _read_torch(docs["torch"], m)
    _read_tensorflow(docs["tensorflow"], m)
    _read_jax(docs["jax"], m)
    _read_images(docs["images"], m)
    _sort_builds(m)
    return m
