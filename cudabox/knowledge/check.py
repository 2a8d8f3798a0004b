"""Cross-checks of the matrix: facts in one file must agree with facts in another.

The loader checks each record's shape; this checks the relations: every
variant's CUDA exists, every cuDNN pin is a known build, every arch list is
compilable by its toolkit, aliases are unique, every source resolves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .matrix import Matrix, normalize_gpu_name
from .model import Provenance, minor_of, parse_arch

_URL = re.compile(r"^https?://\S+$")
_REPO_AT = re.compile(r"^[\w.-]+/[\w.-]+(\s+\S+|\S*)@[0-9a-f]{7,40}\b")  # owner/repo path@commit


@dataclass
class CheckResult:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _records(m: Matrix):
    """(label, provenance) of every record, for the source and status checks."""
    for s in m.sources.values():
        yield f"source {s.key}", s.prov
    for fw in m.frameworks.items:
        yield f"framework {fw.name}", fw.prov
    for major in m.majors.values():
        yield f"CUDA {major.major}.x", major.prov
    for tk in m.toolkits:
        yield f"CUDA {tk.version}", tk.prov
        for rel in tk.releases:
            yield f"CUDA {rel.version}", rel.prov
    for b in m.branches:
        yield f"driver R{b.branch}", b.prov
    for g in m.gpus:
        yield f"GPU {g.name}", g.prov
    if m.thresholds:
        yield "smoke thresholds", m.thresholds.prov
    for s in m.cudnn:
        yield f"cuDNN {s.series}", s.prov
    for b in m.builds:
        yield b.label, b.prov
    for c in m.companions:
        yield f"{c.name} {c.version}", c.prov
    for o in m.os_info.values():
        yield f"OS {o.os}", o.prov
    for s in m.slim:
        yield f"slim base {s.image}", s.prov
    for i in m.cuda_images:
        yield f"nvidia/cuda {i.cuda}", i.prov
    for t in m.tools.values():
        yield f"tool {t.name}", t.prov


def _check_sources(m: Matrix, label: str, prov: Provenance, out: CheckResult):
    for src in prov.source:
        if src in m.sources or _URL.match(src) or _REPO_AT.match(src):
            continue
        out.errors.append(f"{prov.origin}: {label}: source {src!r} is not a URL, repo@commit, "
                          "or a key of sources.yaml")


def _check_builds(m: Matrix, out: CheckResult):
    cudnn_versions = [Version(b.version) for b in m.cudnn_builds()]
    for b in m.builds:
        where = f"{b.prov.origin}: {b.label}"
        tk = m.toolkit(b.cuda)
        if tk is None:
            out.errors.append(f"{where}: CUDA {b.cuda} is not a toolkit in cuda.yaml")
        if b.cudnn:
            spec = SpecifierSet(b.cudnn)
            exact = b.cudnn.startswith("==") and "*" not in b.cudnn
            if exact and Version(b.cudnn[2:]) not in cudnn_versions:
                out.errors.append(f"{where}: cuDNN pin {b.cudnn[2:]} is not a build in cudnn.yaml")
            elif not any(v in spec for v in cudnn_versions):
                out.errors.append(f"{where}: no cuDNN build in cudnn.yaml satisfies {b.cudnn}")
            if exact:
                series = m.cudnn_series(b.cudnn[2:])
                if series is not None and series.supports_cuda(b.cuda) is False:
                    out.warnings.append(f"{where}: cuDNN {series.series}'s support matrix does not list "
                                        f"CUDA {b.cuda}")
        if b.system_cudnn and m.cudnn_series(b.system_cudnn) is None:
            out.errors.append(f"{where}: cuDNN series {b.system_cudnn} is not in cudnn.yaml")
        for soname in b.sonames:
            if soname not in m.libraries:
                out.errors.append(f"{where}: soname {soname} is not in cuda.yaml's libraries")
            elif not m.libraries[soname].shipped_by(b.cuda):
                out.errors.append(f"{where}: built with CUDA {b.cuda}, which doesn't ship {soname} (cuda.yaml)")
        if tk is not None:
            for target in b.arch.sass:
                if target not in tk.sass:
                    out.errors.append(f"{where}: {target} is not compilable by CUDA {tk.version}")
            for target in b.arch.ptx:
                _, major, minor, _ = parse_arch(target)
                if f"sm_{major}{minor}" not in tk.sass:
                    out.errors.append(f"{where}: {target} is not compilable by CUDA {tk.version}")


def _check_gpus(m: Matrix, out: CheckResult):
    owner: dict[str, str] = {}
    for g in m.gpus:
        for name in (g.name, *g.aliases):
            key = normalize_gpu_name(name)
            if not key:
                out.errors.append(f"{g.prov.origin}: GPU {g.name}: empty alias {name!r}")
            elif key in owner and owner[key] != g.name:
                out.errors.append(f"{g.prov.origin}: GPU {g.name}: alias {name!r} also names {owner[key]}")
            owner.setdefault(key, g.name)
        if not any(tk.can_compile(g.cc) for tk in m.toolkits):
            out.warnings.append(f"{g.prov.origin}: GPU {g.name}: no toolkit in cuda.yaml compiles {g.sm}")


def _check_images(m: Matrix, out: CheckResult):
    releases = {r.version for tk in m.toolkits for r in tk.releases}
    cudnn = {b.version for b in m.cudnn_builds()}
    for i in m.cuda_images:
        where = f"{i.prov.origin}: nvidia/cuda {i.cuda}"
        if i.cuda not in releases:
            out.errors.append(f"{where}: CUDA {i.cuda} is not a release in cuda.yaml")
        if i.cudnn and i.cudnn not in cudnn:
            out.errors.append(f"{where}: cuDNN {i.cudnn} is not a build in cudnn.yaml")
        if i.cudnn_os and not i.cudnn_prefix:
            out.errors.append(f"{where}: has cudnn tags but no cudnn_prefix")
        unknown = [o for o in i.cudnn_os if o not in i.os]
        if unknown:
            out.errors.append(f"{where}: cudnn_os {unknown} not in its os list")
        if i.require and not i.require.lower().startswith(f"cuda>={minor_of(i.cuda)}"):
            out.errors.append(f"{where}: require {i.require!r} does not start with cuda>={minor_of(i.cuda)}")
    for s in m.slim:
        if s.os not in m.os_info:
            out.errors.append(f"{s.prov.origin}: slim base {s.image}: OS {s.os} is not in images.yaml os")


def _check_misc(m: Matrix, out: CheckResult):
    toolkit_minors = {tk.version for tk in m.toolkits}
    for b in m.branches:
        if b.cuda not in toolkit_minors:
            out.warnings.append(f"{b.prov.origin}: driver R{b.branch} reports CUDA {b.cuda}, "
                                "for which no toolkit exists (expected for 12.7)")
    for c in m.companions:
        versions = {b.version for b in m.builds_of(c.framework)}
        if c.pin and not any(Version(v) in SpecifierSet(c.pin) for v in versions):
            out.errors.append(f"{c.prov.origin}: {c.name} {c.version}: no {c.framework} release matches {c.pin}")
    for tk in m.toolkits:
        for rel in tk.releases:
            if minor_of(rel.version) != tk.version:
                out.errors.append(f"{rel.prov.origin}: CUDA {rel.version} listed under toolkit {tk.version}")
    for major in m.majors.values():
        if not any(tk.major == major.major for tk in m.toolkits):
            out.errors.append(f"{major.prov.origin}: CUDA major {major.major} has no toolkits")


def check(m: Matrix) -> CheckResult:
    """Run every cross-check; errors make `cudabox matrix check` exit 1, warnings don't."""
    out = CheckResult()
    for label, prov in _records(m):
        _check_sources(m, label, prov, out)
        if prov.status == "inferred":
            out.warnings.append(f"{prov.origin}: {label}: inferred (carried from an earlier release, "
                                "not read from a source)")
        elif prov.status == "unverified":
            out.warnings.append(f"{prov.origin}: {label}: unverified")
    _check_builds(m, out)
    _check_gpus(m, out)
    _check_images(m, out)
    _check_misc(m, out)
    out.errors = list(dict.fromkeys(out.errors))
    out.warnings = list(dict.fromkeys(out.warnings))
    return out
