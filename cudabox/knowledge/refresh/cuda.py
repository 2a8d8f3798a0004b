"""`cudabox matrix refresh` for cudnn.yaml and cuda.yaml: the libraries the frameworks pin.

cuDNN: nvidia-cudnn-cu11/cu12/cu13 on PyPI say which builds exist and for
which CUDA major (`wheels`). A build is added when a framework record pins it
exactly (always, so `cudabox matrix check` stays green), or every final build
with `--framework cudnn`. A new series carries min_cc from the series before
it (`status: inferred`); its CUDA list is not on PyPI (null).

CUDA: PyPI's `cuda-toolkit` versions are metapackage versions, not NVIDIA's
release numbers (torch pins cuda-toolkit==13.0.3 where NVIDIA shipped 13.0.2),
so only new CUDA minors are learnt from them: a toolkit with `releases: []`
and its SASS list carried from the minor before (`status: inferred`).
"""

from __future__ import annotations

import copy

from .reader import Planner, as_version, section, series_of


def cudnn_wheels(work: dict) -> dict[str, str]:
    """The nvidia-cudnn wheel of each CUDA major -> the tag cudnn.yaml's wheels lists use (cuda.yaml)."""
    return {m["cudnn_wheel"]: m["tag"] for m in section(work["cuda"], "majors") if m.get("cudnn_wheel")}


def _exact_cudnn_pins(work: dict) -> set[str]:
    """Every exact cuDNN version a framework record pins (torch variants and PyPI pins, [and-cuda])."""
    out = set()
    for rec in work["torch"].get("releases") or ():
        out |= {v.get("cudnn") for v in rec.get("variants") or ()} | {(rec.get("pypi") or {}).get("cudnn")}
    for rec in work["tensorflow"].get("releases") or ():
        out.add(((rec.get("and_cuda") or {}).get("cudnn") or "").removeprefix("=="))
    return {v for v in out if v and v[0].isdigit() and "," not in v}


def cudnn(p: Planner, everything: bool) -> None:
    records = section(p.work["cudnn"], "series")
    have = {b["version"] for s in records for b in s.get("builds") or ()}
    needed = _exact_cudnn_pins(p.work) - have
    if not (everything or needed):
        return
    wheels: dict[str, list[str]] = {}
    projects = cudnn_wheels(p.work)
    for project, tag in projects.items():
        for rel in p.r.releases(project).values():
            if not rel.yanked and rel.wheel:
                wheels.setdefault(rel.version, []).append(tag)
    targets = sorted(set(wheels) if everything else needed, key=as_version)
    urls = [p.r.url(project) for project in projects]
    touched: dict[str, dict] = {}
    for version in targets:
        series = series_of(version)
        old = next((s for s in records if s["series"] == series), None)
        rec = touched.get(series) or (copy.deepcopy(old) if old else _new_series(records, series, urls))
        touched[series] = rec
        builds = rec.setdefault("builds", [])
        found = wheels.get(version, [])
        build = next((b for b in builds if b["version"] == version), None)
        if build is None:
            builds.append({"version": version, "wheels": found})
            builds.sort(key=lambda b: as_version(b["version"]))
        elif found and sorted(build.get("wheels") or []) != sorted(found):
            build["wheels"] = found
        if version not in wheels:
            p.note(f"cuDNN {version} is pinned but has no nvidia-cudnn wheel on PyPI: added with wheels: []")
    for series, rec in sorted(touched.items(), key=lambda kv: as_version(kv[0])):
        old = next((s for s in records if s["series"] == series), None)
        if old is not None and old != rec:
            rec["source"] = _with(old.get("source"), [u for u in urls if any(
                w in u for b in rec["builds"] for w in b.get("wheels") or ())])
        new_builds = [b["version"] for b in rec["builds"]
                      if b["version"] not in {x["version"] for x in (old or {}).get("builds") or ()}]
        p.put("cudnn", "series", "series", rec, old,
              f"new series; builds {', '.join(new_builds)}; min_cc carried (inferred)" if old is None
              else (f"new builds {', '.join(new_builds)}" if new_builds else ""))


def _with(old, urls) -> list[str] | str:
    items = list(dict.fromkeys((old if isinstance(old, list) else [old]) + urls))
    return items[0] if len(items) == 1 else items


def _new_series(records: list, series: str, urls: list[str]) -> dict:
    older = [s for s in records if as_version(s["series"]) < as_version(series)]
    prior = max(older, key=lambda s: as_version(s["series"])) if older else None
    return {"series": series, "cuda": None, "min_cc": prior.get("min_cc") if prior else None, "builds": [],
            "source": urls, "status": "inferred",
            "note": (f"min_cc carried from cuDNN {prior['series']}; " if prior else "")
            + "the CUDA versions it supports are not on PyPI (read NVIDIA's support matrix)"}


def _needed_minors(work: dict) -> set[str]:
    out = set()
    for rec in work["torch"].get("releases") or ():
        out |= {v["cuda"] for v in rec.get("variants") or ()}
    for rec in work["tensorflow"].get("releases") or ():
        out.add(rec.get("cuda"))
    for rec in work["jax"].get("releases") or ():
        out |= {x.get("cuda") or x.get("cuda_min") for x in rec.get("plugins") or ()}
    return {m for m in out if m}


def cuda(p: Planner, everything: bool) -> None:
    records = section(p.work["cuda"], "toolkits")
    have = {t["version"] for t in records}
    minors = _needed_minors(p.work) - have
    url = p.r.url("cuda-toolkit")
    if everything:
        newest = max((as_version(m) for m in have), default=as_version("0"))
        minors |= {series_of(r.version) for r in p.r.releases("cuda-toolkit").values()
                   if as_version(series_of(r.version)) > newest}
    for minor in sorted(minors, key=as_version):
        older = [t for t in records if as_version(t["version"]) < as_version(minor)]
        prior = max(older, key=lambda t: as_version(t["version"])) if older else None
        record = {"version": minor, "sass": list((prior or {}).get("sass") or []), "source": url,
                  "status": "inferred",
                  "note": (f"SASS list carried from CUDA {prior['version']} (not on PyPI); " if prior else "")
                  + "releases and minimum drivers are not on PyPI (add them from NVIDIA's release notes)",
                  "releases": []}
        p.put("cuda", "toolkits", "version", record, None, "new CUDA minor on PyPI; SASS list carried (inferred)")
