"""Views of the matrix for `cudabox matrix show/gpu`: rows for people, data for --json."""

from __future__ import annotations

from ..errors import InputError
from .matrix import Matrix
from .model import GPU, as_data


def _status(prov) -> str:
    return "" if prov.status == "verified" else prov.status


def subject_rows(m: Matrix, subject: str):
    """-> (title, columns, rows, json_data) for one subject."""
    if subject == "cuda":
        rows = []
        for tk in reversed(m.toolkits):
            rels = ", ".join(f"{r.version} (>= {r.driver or '?'})" for r in tk.releases) or "—"
            rows.append((tk.version, rels, _sass_span(tk.sass), _status(tk.prov)))
        majors = [(f"{mj.major}.x", f"minor-version compat >= {mj.minor_compat_driver}") for mj in m.majors.values()]
        rows += [(a, b, "", "") for a, b in majors]
        data = {"majors": as_data(list(m.majors.values())), "toolkits": as_data(m.toolkits)}
        return "CUDA toolkits", ["CUDA", "releases (min Linux driver)", "SASS targets", "status"], rows, data
    if subject == "drivers":
        rows = [(f"R{b.branch}", b.cuda, _status(b.prov), b.prov.note or "") for b in reversed(m.branches)]
        return "Driver branches", ["branch", "native CUDA", "status", "note"], rows, as_data(m.branches)
    if subject == "gpus":
        rows = [(g.name, g.cc, g.arch, g.gpu_class, _num(g.memory_gb), _num(g.peak_fp16_tflops),
                 _num(g.peak_bandwidth_gbs), ", ".join(g.aliases[:3]) + (" …" if len(g.aliases) > 3 else ""),
                 _status(g.prov)) for g in sorted(m.gpus, key=lambda g: (g.gpu_class, g.cc, g.name))]
        cols = ["GPU", "CC", "arch", "class", "GB", "FP16 TFLOPS", "GB/s", "aliases", "status"]
        return "GPUs", cols, rows, as_data(m.gpus)
    if subject == "cudnn":
        rows = [(s.series, _ranges(s.cuda), s.min_cc or "—", ", ".join(b.version for b in s.builds),
                 _status(s.prov)) for s in reversed(m.cudnn)]
        return "cuDNN", ["series", "CUDA", "min CC", "builds", "status"], rows, as_data(m.cudnn)
    if subject in m.frameworks.names:
        releases = [r for r in m.releases if r.framework == subject]
        rows = [(r.series, ", ".join(r.versions), r.python.describe(), r.summary, _status(r.prov))
                for r in releases]
        rows.sort(key=lambda row: [int(p) for p in row[0].split(".")], reverse=True)
        data = {"releases": as_data(releases), "builds": as_data(m.builds_of(subject))}
        if m.frameworks.get(subject).companions:
            data["companions"] = as_data([c for c in m.companions if c.framework == subject])
        return f"{subject} releases", ["release", "versions", "Python", "builds", "status"], rows, data
    if subject == "images":
        rows = [(i.cuda, i.lifecycle, i.cudnn or "—", ", ".join(i.os), i.require or "—")
                for i in reversed(m.cuda_images)]
        rows += [(s.image, "slim base", "—", s.os, "—") for s in m.slim]
        data = {"os": as_data(list(m.os_info.values())), "slim": as_data(m.slim),
                "nvidia_cuda": as_data(m.cuda_images)}
        return "Base images", ["CUDA / image", "status", "cuDNN", "OS", "NVIDIA_REQUIRE_CUDA"], rows, data
    known = ("cuda", "drivers", "gpus", "cudnn", *m.frameworks.names, "images")
    raise InputError(f"matrix show: unknown subject {subject!r} (known: {', '.join(known)})")


def gpu_report(m: Matrix, gpu: GPU) -> dict:
    """What a GPU is, which toolkits compile for it, which framework builds cover it."""
    toolkits = [{"cuda": tk.version, "min_driver": str(tk.min_driver) if tk.min_driver else None}
                for tk in m.toolkits if tk.can_compile(gpu.cc)]
    frameworks, refused = [], []
    by_release: dict[tuple[str, str], list[str]] = {}
    for b in m.builds:
        how = b.arch.coverage(gpu.cc, ptx_jit=True)
        series = ".".join(b.version.split(".")[:2])
        key = (b.framework, series)
        if how:
            entry = f"{b.variant} ({how})"
            lst = by_release.setdefault(key, [])
            if entry not in lst:
                lst.append(entry)
    seen_refused = set()
    for b in m.builds:
        series = ".".join(b.version.split(".")[:2])
        key = (b.framework, series)
        if key not in by_release and key not in seen_refused:
            seen_refused.add(key)
            refused.append(f"{b.framework} {series}: no build carries code for {gpu.sm} "
                           f"(arch list: {b.arch.describe()})")
    for (framework, series), variants in by_release.items():
        frameworks.append({"framework": framework, "series": series, "variants": ", ".join(variants)})
    data = as_data(gpu)
    data["class"] = data.pop("gpu_class")
    data["sm"] = gpu.sm
    data["status"] = gpu.prov.status
    data["note"] = gpu.prov.note
    return {"gpu": data, "toolkits": toolkits, "frameworks": frameworks, "refused": refused}


def _num(x):
    return "—" if x is None else f"{x:g}"


def _ranges(r):
    if r is None:
        return "unknown"
    return ", ".join(lo if lo == hi else f"{lo}-{hi}" for lo, hi in r)


def _sass_span(sass):
    if not sass:
        return "—"
    return f"{sass[0]} … {sass[-1]} ({len(sass)})"
