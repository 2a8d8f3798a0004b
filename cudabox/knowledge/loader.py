"""Build the typed `Matrix` from the merged documents, one reader per subject file.

The YAML is checked against the schema in docs/matrices.md as it is read;
a broken file fails with `matrices/torch.yaml:123: what is wrong` (exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..errors import CudaboxError, located
from ..files import Node
from . import fields as f
from .matrix import Matrix
from .model import (
    GPU_CLASSES,
    IMAGE_STATUSES,
    ArchList,
    Build,
    Companion,
    Library,
    CudaImage,
    CudaMajor,
    CudaRelease,
    CudnnBuild,
    CudnnSeries,
    DriverBranch,
    FrameworkRelease,
    GPU,
    OSInfo,
    Provenance,
    SlimBase,
    Source,
    Thresholds,
    Tool,
    Toolkit,
    cuda_version,
)
from .frameworks import SHAPES, Framework, Frameworks, Frontend
from .overlay import SUBJECTS, load_documents, section_at


def _records(doc: Node, dotted: str, subject_path: str):
    section = section_at(doc, dotted)
    if section is None:
        return []
    if not isinstance(section, list):
        raise located(subject_path, getattr(section, "line", None), f"'{dotted}' must be a list")
    return section


def _rec(node, what) -> f.Record:
    path = getattr(node, "origin_path", "matrices")
    return f.Record(node, path, what)


def _read_sources(doc, m: Matrix):
    section = doc.get("sources") or Node()
    for key, node in section.items():
        r = _rec(node, f"source {key}")
        url = r.get("url", f.string)
        m.sources[str(key)] = Source(
            key=str(key), url=url, title=r.get("title", f.string, ""),
            strength=r.get("strength", f.choice("P", "P-copy", "S", "UNVERIFIED")),
            prov=Provenance(source=(url,), note=r.get("note", f.string, None), origin=f"{r.path}:{node.line}"),
        )
        r.done()
    if doc.get("refresh") is not None:  # what `matrix refresh` covers (docs/refresh.md)
        r = _rec(doc["refresh"], "refresh")
        r.get("refreshed", _date)
        floors = r.get("floors", lambda x: x)
        fr = _rec(floors, "refresh floors")
        for name in list(floors):
            fr.get(name, f.version)
        fr.done()
        r.done()


def _date(v):
    s = v.isoformat() if hasattr(v, "isoformat") else f.string(v)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
        raise ValueError(f"expected a date YYYY-MM-DD, got {s!r}")
    return s


def _read_cuda(doc, m: Matrix):
    for node in _records(doc, "majors", "cuda.yaml"):
        r = _rec(node, "CUDA major")
        major = CudaMajor(
            major=r.get("major", f.integer), minor_compat_driver=r.get("minor_compat_driver", f.driver),
            wheel_suffix=r.get("wheel_suffix", lambda v: "" if v is None else f.string(v)),
            cudnn_wheel=r.get("cudnn_wheel", f.string), tag=r.get("tag", f.string), prov=r.prov(),
        )
        r.done()
        m.majors[major.major] = major
    for node in _records(doc, "libraries", "cuda.yaml"):
        r = _rec(node, "CUDA library")
        lib = Library(soname=r.get("soname", f.string), cuda=r.get("cuda", f.specifier), prov=r.prov())
        r.done()
        m.libraries[lib.soname] = lib
    for node in _records(doc, "toolkits", "cuda.yaml"):
        r = _rec(node, "toolkit")
        version = r.get("version", f.minor)
        releases = []
        for rel in r.get("releases", f.list_of(lambda x: x)):
            rr = _rec(rel, f"CUDA {version} release")
            releases.append(CudaRelease(
                version=rr.get("version", f.version), label=rr.get("label", f.string, ""),
                driver=rr.get("driver", f.driver), prov=rr.prov()))
            rr.done()
        m.toolkits.append(Toolkit(version=version, sass=r.get("sass", f.list_of(f.arch("sm"))),
                                  releases=tuple(releases), prov=r.prov()))
        r.done()
    m.toolkits.sort(key=lambda t: t.key)


def _read_drivers(doc, m: Matrix):
    for node in _records(doc, "branches", "drivers.yaml"):
        r = _rec(node, "driver branch")
        m.branches.append(DriverBranch(branch=r.get("branch", f.integer), cuda=r.get("cuda", f.minor), prov=r.prov()))
        r.done()
    m.branches.sort(key=lambda b: b.branch)


def _read_gpus(doc, m: Matrix):
    if "thresholds" in doc:
        r = _rec(doc["thresholds"], "thresholds")
        m.thresholds = Thresholds(gemm_pass=r.get("gemm_pass", f.number),
                                  bandwidth_pass=r.get("bandwidth_pass", f.number), prov=r.prov())
        r.done()
    for node in _records(doc, "gpus", "gpus.yaml"):
        r = _rec(node, "GPU")
        m.gpus.append(GPU(
            name=r.get("name", f.string), cc=r.get("cc", f.cc), arch=r.get("arch", f.string),
            gpu_class=r.get("class", f.choice(*GPU_CLASSES)), memory_gb=r.get("memory_gb", f.number, None),
            peak_fp16_tflops=r.get("peak_fp16_tflops", f.number, None),
            peak_bandwidth_gbs=r.get("peak_bandwidth_gbs", f.number, None),
            aliases=r.get("aliases", f.list_of(f.string), ()), prov=r.prov()))
        r.done()


def _read_cudnn(doc, m: Matrix):
    tags = tuple(major.tag for major in m.majors.values())  # wheels are named per CUDA major (cuda.yaml)
    for node in _records(doc, "series", "cudnn.yaml"):
        r = _rec(node, "cuDNN series")
        series = r.get("series", f.minor)
        builds = []
        for b in r.get("builds", f.list_of(lambda x: x), ()):
            br = _rec(b, f"cuDNN {series} build")
            builds.append(CudnnBuild(version=br.get("version", f.version),
                                     wheels=br.get("wheels", f.list_of(f.choice(*tags)), ())))
            br.done()
        m.cudnn.append(CudnnSeries(series=series, cuda=r.get("cuda", f.cuda_ranges, None),
                                   min_cc=r.get("min_cc", f.optional(f.cc), None), builds=tuple(builds),
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


def _read_frameworks(doc, m: Matrix):
    items, seen = [], set()
    for node in _records(doc, "frameworks", "frameworks.yaml"):
        r = _rec(node, "framework")
        name = r.get("name", f.string)
        what = f"framework {name}"
        r.what = what
        if name in SUBJECTS:
            raise r.error("name", f"{what}: '{name}' is a matrix subject, not a framework name")
        fw = Framework(
            name=name, shape=r.get("shape", f.choice(*SHAPES)), aliases=r.get("aliases", f.list_of(f.string), ()),
            conda=r.get("conda", f.list_of(f.string), ()), companions=r.get("companions", f.list_of(f.string), ()),
            local_tag=r.get("local_tag", f.optional(f.template), None), extra=r.get("extra", f.optional(f.template), None),
            without_extra=r.get("without_extra", f.optional(f.string), None),
            pypi_default=r.get("pypi_default", f.optional(f.string), None),
            cpu_local_tag=r.get("cpu_local_tag", f.optional(f.string), None),
            cpu_extra=r.get("cpu_extra", f.optional(f.string), None),
            package=r.get("package", f.optional(f.template), None), post_tag=r.get("post_tag", f.optional(f.template), None),
            variant_name=r.get("variant_name", f.optional(f.template), None),
            retired=r.get("retired", f.optional(f.string), None),
            system_packages=r.get("system_packages", f.list_of(f.string), ()),
            plugin_package=r.get("plugin_package", f.optional(f.template), None),
            python_from=r.get("python_from", f.optional(f.string), None), prov=r.prov())
        r.done()
        if fw.plugin_package and fw.shape != "plugins":
            raise r.error("plugin_package", f"{what}: plugin_package is for the plugins shape")
        if (fw.post_tag or (fw.package and "{" in fw.package)) and not fw.variant_name:
            raise r.error("variant_name", f"{what}: a package template or post_tag needs 'variant_name'")
        if fw.shape in ("extra", "plugins") and not fw.extra:
            raise r.error("shape", f"{what}: shape {fw.shape} needs an 'extra'")
        if fw.shape == "extra" and not fw.without_extra:
            raise r.error("shape", f"{what}: shape extra needs 'without_extra' (the system-CUDA variant)")
        for alias in (name, *fw.aliases, *fw.companions):
            if alias in seen:
                raise r.error("name", f"{what}: {alias!r} already names another framework or companion")
            seen.add(alias)
        items.append(fw)
    names = {fw.name for fw in items}
    frontends = []
    for node in _records(doc, "frontends", "frameworks.yaml"):
        r = _rec(node, "frontend")
        name = r.get("name", f.string)
        r.what = f"frontend {name}"
        backends = r.get("backends", lambda v: v)
        rule = Frontend(
            name=name, default=r.get("default", f.string),
            backends=tuple((str(k), None if v is None else f.string(v)) for k, v in (backends or {}).items()),
            backend_env=r.get("backend_env", f.optional(f.string), None),
            choosable=SpecifierSet(r.get("choosable", f.optional(f.specifier), None) or ""),
            fixed_spec=SpecifierSet(r.get("fixed_spec", f.optional(f.specifier), None) or ""),
            same_minor=r.get("same_minor", f.boolean, False), prov=r.prov())
        r.done()
        mapping = dict(rule.backends)
        bad = sorted(v for v in mapping.values() if v is not None and v not in names)
        if bad or rule.default not in mapping:
            raise r.error("backends", f"frontend {name}: " + (f"backend framework {bad[0]!r} is not declared"
                                                               if bad else f"default {rule.default!r} is not a backend"))
        if name in seen:
            raise r.error("name", f"frontend {name}: {name!r} already names a framework, companion or frontend")
        seen.add(name)
        frontends.append(rule)
    m.frameworks = Frameworks(tuple(items), tuple(frontends))


def _read_variants(doc, m: Matrix, fw: Framework):
    for node in _records(doc, "releases", f"{fw.name}.yaml"):
        r = _rec(node, f"{fw.name} release")
        series = r.get("series", f.minor)
        versions = r.get("versions", f.list_of(f.version))
        python = r.get("python", f.python)
        default = r.get("pypi_default", f.optional(f.string), None)
        pypi = r.get("pypi", lambda x: x, None)
        pypi_runtime = None
        if pypi is not None:
            pr = _rec(pypi, f"{fw.name} {series} pypi")
            pypi_runtime = pr.get("cuda_runtime", f.optional(f.version), None)
            pr.get("cudnn", f.optional(f.version), None)
            pr.prov()
            pr.done()
        prov = r.prov()
        variants = []
        for vnode in r.get("variants", f.list_of(lambda x: x)):
            vr = _rec(vnode, f"{fw.name} {series} variant")
            variants.append(dict(
                name=vr.get("name", f.string), cuda=vr.get("cuda", f.minor), cudnn=vr.get("cudnn", f.pin, None),
                index=vr.get("index", f.optional(f.string), None), sass=vr.get("sass", f.list_of(f.arch("sm")), ()),
                ptx=vr.get("ptx", f.list_of(f.arch("compute")), ()), min_cc=vr.get("min_cc", f.optional(f.cc), None),
                system_cudnn=vr.get("system_cudnn", f.optional(f.minor), None),
                post=vr.get("post", f.optional(f.string), None), package=vr.get("package", f.optional(f.string), None),
                python=vr.get("python", f.python, None), prov=vr.prov()))
            vr.done()
        r.done()
        if default is not None and default not in {v["name"] for v in variants}:
            raise r.error("pypi_default", f"{fw.name} {series}: pypi_default {default!r} is not one of its variants")
        m.releases.append(FrameworkRelease(
            fw.name, series, versions, python,
            "; ".join(f"{v['name']}{' (PyPI)' if v['name'] == default else ''}"
                      + (f" (Python {v['python'].describe()})" if v["python"] else "") for v in variants), prov))
        for version in versions:
            for v in variants:
                is_default = v["name"] == default
                system = v["system_cudnn"] is not None  # CUDA and cuDNN from the base image (Paddle 2.x, MXNet)
                m.builds.append(Build(
                    framework=fw.name, version=version, variant=v["name"], cuda=v["cuda"],
                    cuda_min=v["cuda"] if system else None,
                    cudnn=v["cudnn"], cuda_runtime=f"=={pypi_runtime}" if is_default and pypi_runtime else None,
                    python=v["python"] or python, arch=ArchList(sass=v["sass"], ptx=v["ptx"], min_cc=v["min_cc"]),
                    wheels_cuda=not system, system_cudnn=v["system_cudnn"], pypi_default=is_default,
                    index=None if is_default else v["index"],
                    requirement=fw.requirement(version, v["name"], pypi_default=is_default, post=v["post"],
                                               package=v["package"]),
                    prov=_merge_prov(prov, v["prov"])))
    companions = doc.get("companions") or Node()
    for name in fw.companions:
        for node in _records(doc, f"companions.{name}", f"{fw.name}.yaml"):
            r = _rec(node, name)
            m.companions.append(Companion(name=name, version=r.get("version", f.version),
                                          pin=r.get(fw.name, f.optional(f.specifier), None), prov=r.prov(),
                                          framework=fw.name))
            r.done()
    for key in companions:
        if key not in fw.companions:
            raise located(companions.origin_path, companions.line_of(key), f"unknown companion '{key}'")


def _read_extra(doc, m: Matrix, fw: Framework):
    for node in _records(doc, "releases", f"{fw.name}.yaml"):
        r = _rec(node, f"{fw.name} release")
        series = r.get("series", f.minor)
        versions = r.get("versions", f.list_of(f.version))
        python = r.get("python", f.python)
        cuda = r.get("cuda", f.minor)
        cudnn_series = r.get("cudnn", f.minor)
        and_cuda = r.get("and_cuda", lambda x: x, None)
        arch = ArchList(sass=r.get("sass", f.list_of(f.arch("sm")), ()), ptx=r.get("ptx", f.list_of(f.arch("compute")), ()))
        sonames = tuple(r.get("sonames", f.list_of(f.string), ()))
        prov = r.prov()
        r.done()
        pins = None
        if and_cuda is not None:
            ar = _rec(and_cuda, f"{fw.name} {series} and_cuda")
            pins = dict(major=ar.get("cuda_major", f.integer), runtime=ar.get("cuda_runtime", f.pin, None),
                        cudnn=ar.get("cudnn", f.pin, None), python=ar.get("python", f.python, None),
                        prov=ar.prov())
            ar.done()
        m.releases.append(FrameworkRelease(
            fw.name, series, versions, python,
            f"CUDA {cuda}, cuDNN {cudnn_series}" + (f" (wheels: [{fw.extra}])" if pins else " (system CUDA)"), prov))
        for version in versions:
            if pins:
                # [and-cuda] pins a CUDA major; the runtime wheel pin says which minor
                m.builds.append(Build(
                    framework=fw.name, version=version, variant=fw.extra, cuda=cuda, cuda_min=None,
                    cudnn=pins["cudnn"], cuda_runtime=pins["runtime"], python=pins["python"] or python, arch=arch,
                    wheels_cuda=True, system_cudnn=None, pypi_default=True, index=None,
                    requirement=fw.requirement(version, fw.extra), prov=_merge_prov(prov, pins["prov"])))
            else:
                m.builds.append(Build(
                    framework=fw.name, version=version, variant=fw.without_extra, cuda=cuda, cuda_min=cuda,
                    cudnn=None, cuda_runtime=None, python=python, arch=arch, wheels_cuda=False,
                    system_cudnn=cudnn_series, pypi_default=True, index=None,
                    requirement=fw.requirement(version, fw.without_extra), prov=prov, sonames=sonames))


def _read_plugins(doc, m: Matrix, fw: Framework):
    for node in _records(doc, "releases", f"{fw.name}.yaml"):
        r = _rec(node, f"{fw.name} release")
        versions = r.get("versions", f.list_of(f.version))
        python = r.get("python", f.python)
        prov = r.prov()
        plugins = []
        for pnode in r.get("plugins", f.list_of(lambda x: x)):
            pr = _rec(pnode, f"{fw.name} {versions[0]} plugin")
            plugins.append(dict(
                name=pr.get("name", f.string), major=pr.get("cuda_major", f.integer),
                cuda=pr.get("cuda", f.optional(f.minor), None), cuda_min=pr.get("cuda_min", f.minor),
                cudnn=pr.get("cudnn", f.pin, None), min_cc=pr.get("min_cc", f.optional(f.cc), None),
                prov=pr.prov()))
            pr.done()
        r.done()
        series = ".".join(versions[0].split(".")[:2])
        m.releases.append(FrameworkRelease(
            fw.name, series, versions, python,
            "; ".join(f"{fw.name}[{p['name']}] cuDNN {p['cudnn'] or '-'}" for p in plugins), prov))
        for version in versions:
            for p in plugins:
                m.builds.append(Build(
                    framework=fw.name, version=version, variant=p["name"], cuda=p["cuda"] or p["cuda_min"],
                    cuda_min=p["cuda_min"], cudnn=p["cudnn"], cuda_runtime=None, python=python,
                    arch=ArchList(min_cc=p["min_cc"]), wheels_cuda=True, system_cudnn=None,
                    pypi_default=p["name"] == fw.pypi_default, index=None,
                    requirement=fw.requirement(version, p["name"]),
                    prov=_merge_prov(prov, p["prov"])))


def _read_images(doc, m: Matrix):
    for node in _records(doc, "os", "images.yaml"):
        r = _rec(node, "OS")
        info = OSInfo(os=r.get("os", f.string), python=r.get("python", f.minor), prov=r.prov(),
                      glibc=r.get("glibc", f.minor, None))
        r.done()
        m.os_info[info.os] = info
    for node in _records(doc, "tools", "images.yaml"):
        r = _rec(node, "tool")
        tool = Tool(name=r.get("name", f.string), version=r.get("version", f.version), prov=r.prov())
        r.done()
        m.tools[tool.name] = tool
    for node in _records(doc, "slim", "images.yaml"):
        r = _rec(node, "slim base")
        m.slim.append(SlimBase(image=r.get("image", f.string), os=r.get("os", f.string), prov=r.prov()))
        r.done()
    for node in _records(doc, "nvidia_cuda", "images.yaml"):
        r = _rec(node, "nvidia/cuda image")
        lifecycle = r.get("status", f.choice(*IMAGE_STATUSES))
        image = CudaImage(
            cuda=r.get("cuda", f.version), lifecycle=lifecycle, require=r.get("require", f.optional(f.string), None),
            cudnn=r.get("cudnn", f.optional(f.version), None),
            cudnn_prefix=r.get("cudnn_prefix", f.optional(f.choice("cudnn8", "cudnn9", "cudnn")), None),
            os=r.get("os", f.list_of(f.string)), cudnn_os=r.get("cudnn_os", f.list_of(f.string), ()),
            prov=Provenance(source=r.get("source", lambda v: f.list_of(f.string)(v) if isinstance(v, list) else (f.string(v),)),
                            note=r.get("note", f.string, None), origin=f"{r.path}:{node.line}"))
        r.done()
        m.cuda_images.append(image)
    m.cuda_images.sort(key=lambda i: cuda_version(i.cuda))


def _sort_builds(m: Matrix):
    # later records (overlays) win for the same framework/version/variant
    unique = {}
    for b in m.builds:
        unique[(b.framework, b.version, b.variant)] = b
    m.builds = sorted(unique.values(), key=lambda b: (m.frameworks.order(b.framework), _neg(b.version), b.variant))


def _neg(version: str):
    return tuple(-p for p in Version(version).release)


def load(project_dir: Path | None = None, *, bundled: Path | None = None) -> Matrix:
    """Load and type-check the whole matrix (bundled data + overlays), through the compiled cache."""
    from . import compiled

    return compiled.cached(project_dir, bundled, lambda: from_documents(load_documents(project_dir, bundled)))


def load_frameworks(project_dir: Path | None = None, *, bundled: Path | None = None) -> Frameworks:
    """The frameworks (frameworks.yaml + overlays): what reading a project's files needs. From the compiled
    matrix (no YAML parsing: ~15 ms less on every command reading cudabox.yaml); from frameworks.yaml alone
    when another matrix file is broken (the commands that need it say so)."""
    try:
        return load(project_dir, bundled=bundled).frameworks
    except CudaboxError:
        pass
    m = Matrix()
    _read_frameworks(load_documents(project_dir, bundled, only_frameworks=True)["frameworks"], m)
    return m.frameworks


def from_documents(docs: dict[str, Node]) -> Matrix:
    """Type-check merged documents (one per subject) into a Matrix."""
    m = Matrix()
    _read_sources(docs["sources"], m)
    _read_frameworks(docs["frameworks"], m)
    _read_cuda(docs["cuda"], m)
    _read_drivers(docs["drivers"], m)
    _read_gpus(docs["gpus"], m)
    _read_cudnn(docs["cudnn"], m)
    for fw in m.frameworks.items:
        SHAPE_READERS[fw.shape](docs[fw.name], m, fw)
    _read_images(docs["images"], m)
    _sort_builds(m)
    return m


SHAPE_READERS = {"variants": _read_variants, "extra": _read_extra, "plugins": _read_plugins}
