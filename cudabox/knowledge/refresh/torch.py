"""`cudabox matrix refresh` for torch.yaml: releases, their CUDA variants, torchvision/torchaudio pairings.

PyPI states the plain `torch` wheel's pins (its `pypi_default` variant, CUDA
runtime and cuDNN) and its Pythons; download.pytorch.org, when it can be read,
which other variants a release has and each one's Python tags (a variant whose
wheels there cover other Pythons than the series' gets its own `python:`).
Arch lists, and the variants when the index can't be read, are carried from an
earlier release (`status: inferred`). The shared rules are in `refresh_frameworks`.
"""

from __future__ import annotations

import copy

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .frameworks import (
    add_source,
    added_words,
    by_series,
    common_pythons,
    data_floor,
    merge_versions,
    prior_record,
    release_candidates,
    same_spec,
    sources_of,
    span,
    wheel_pythons,
)
from .index import PYTORCH_INDEX, variant_cuda
from .reader import Planner, as_version, companion_pin, section, torch_pins


def _torch_variant(name: str, pins: dict, prior: dict, listed: bool, url: str) -> dict:
    """A CUDA variant of a new torch release: CUDA from its name, the rest carried from `prior`."""
    cuda = variant_cuda(name)
    same = next((v for v in prior["variants"] if v["name"] == name), None)
    older = [v for v in prior["variants"] if as_version(v["cuda"]) <= as_version(cuda)]
    model = same or (max(older, key=lambda v: as_version(v["cuda"])) if older else prior["variants"][-1])
    default = name == pins["variant"]
    carried = "arch lists" if default else ("cuDNN and arch lists" if listed else "variant, cuDNN and arch lists")
    why = "CUDA and cuDNN from the PyPI wheel; " if default else ("listed on download.pytorch.org; " if listed else "")
    return {"name": name, "cuda": cuda, "cudnn": pins["cudnn"] if default else model.get("cudnn"),
            "index": f"https://download.pytorch.org/whl/{name}", "sass": list(model.get("sass") or []),
            "ptx": list(model.get("ptx") or []), "source": sources_of(url, PYTORCH_INDEX if listed else None),
            "status": "inferred", "note": f"{why}{carried} carried from torch {prior['series']} {model['name']}"}


def _model_series(p: Planner, name: str, series: str, prior: dict) -> dict:
    """The newest earlier series that has variant `name` (its arch lists fit that CUDA), else `prior`:
    a cu126 listed for 2.16 carries 2.14's cu126, not 2.15's cu132 (whose sm_100 CUDA 12.6 can't build)."""
    if any(v["name"] == name for v in prior.get("variants") or ()):
        return prior
    earlier = [r for r in section(p.work["torch"], "releases") if as_version(r["series"]) < as_version(series)]
    earlier.sort(key=lambda r: as_version(r["series"]), reverse=True)
    return next((r for r in earlier if any(v["name"] == name for v in r.get("variants") or ())), prior)


def _torch_variants(p: Planner, series: str, versions: list[str], pins: dict, prior: dict,
                    pythons: list[str] | None = None) -> tuple[list, str]:
    index = p.r.pytorch_index()
    listed = set().union(*(index.get(v, set()) for v in versions)) if index else set()
    names = sorted(listed) if listed else [v["name"] for v in prior["variants"]]
    if pins["variant"] and pins["variant"] not in names:
        names.append(pins["variant"])
    names.sort(key=lambda n: as_version(variant_cuda(n)))
    url = p.r.url("torch")
    variants = [_torch_variant(n, pins, _model_series(p, n, series, prior), bool(listed), url) for n in names]
    for variant in variants:
        if variant["name"] != pins["variant"]:
            _variant_python(p, variant, versions, pythons or [])
    own = [f"{v['name']} {span(v['python'])}" for v in variants if v.get("python")]
    if listed:
        return variants, (f"variants {'/'.join(names)} from download.pytorch.org"
                          + (f" ({', '.join(own)}: its wheels there)" if own else "")
                          + f", cuDNN and arch lists carried from {prior['series']} (inferred)")
    return variants, f"inferred variants {'/'.join(names)} carried from {prior['series']}"


def _index_pythons(p: Planner, versions, name: str) -> list[str]:
    """The CPython minors of `name`'s Linux x86_64 wheels on download.pytorch.org that every version listing
    that variant has ([] when the index lists none)."""
    sets = [set(p.r.index_pythons[(v, name)]) for v in versions if (v, name) in p.r.index_pythons]
    return sorted(set.intersection(*sets), key=as_version) if sets else []


def _variant_python(p: Planner, variant: dict, versions, series_python: list[str]) -> None:
    """A variant installed from download.pytorch.org gets its own `python` where its wheels there cover other
    Pythons than the series' list (PyPI's wheels), and none where they agree (the index wins over an old list).
    Unchanged when the index lists no wheel of it (or can't be read)."""
    tags = _index_pythons(p, versions, variant["name"])
    if not tags:
        return
    series = [str(x) for x in series_python]
    if tags == series:
        variant.pop("python", None)
        return
    if [str(x) for x in variant.get("python") or []] == tags:
        return
    items = [(k, v) for k, v in variant.items() if k != "python"]  # python goes before the arch lists
    at = next((i for i, (k, _) in enumerate(items) if k == "sass"), len(items))
    variant.clear()
    variant.update(items[:at] + [("python", tags)] + items[at:])
    add_source(variant, PYTORCH_INDEX)


def _index_variant_pythons(p: Planner, record: dict) -> None:
    """An existing series' non-default variants against the index's wheel tags (when it can be read)."""
    if not p.r.pytorch_index(say=False):
        return
    for variant in record.get("variants") or ():
        if variant["name"] != record.get("pypi_default"):
            _variant_python(p, variant, record["versions"], record.get("python") or [])


def torch(p: Planner) -> None:
    records = section(p.work["torch"], "releases")
    floor = data_floor(p, "torch", [r["series"] for r in records])
    rels = release_candidates(p.r, "torch", floor)
    metas = p.r.metadata(rels)
    pins = {r.version: torch_pins(metas[r.version].requires_dist) for r in rels}
    url = p.r.url("torch")
    for series, group in sorted(by_series(rels).items(), key=lambda kv: as_version(kv[0])):
        old = next((r for r in records if r["series"] == series), None)
        if old is None:
            _new_torch(p, records, series, group, pins, metas, url)
            continue
        new = copy.deepcopy(old)
        known = [r for r in group if r.version in old["versions"]]
        series_pins = pins[(known or group)[0].version]
        pypi = new.setdefault("pypi", {})
        want = {"cuda_runtime": series_pins["cuda_runtime"], "cudnn": series_pins["cudnn"]}
        if (new.get("pypi_default"), pypi.get("cuda_runtime"), pypi.get("cudnn")) != \
                (series_pins["variant"], want["cuda_runtime"], want["cudnn"]):
            new["pypi_default"] = series_pins["variant"]
            pypi.update(want)
            add_source(pypi, metas[(known or group)[0].version].url)
            _fix_default_variant(p, new, series_pins, records)
        added = merge_versions(p, "torch", new, group, pins, series_pins, _pin_words)
        for v in added:
            add_source(pypi, metas[v].url)
        wheel_pythons(new, group, url)
        _index_variant_pythons(p, new)
        p.put("torch", "releases", "series", new, old, added_words(group, added))



def _fix_default_variant(p: Planner, record: dict, pins: dict, records: list) -> None:
    variant = next((v for v in record["variants"] if v["name"] == pins["variant"]), None)
    if pins["variant"] is None:
        return
    if variant is None:
        prior = prior_record(records, lambda r: as_version(r["series"]), as_version(record["series"])) or record
        record["variants"].append(_torch_variant(pins["variant"], pins, prior, False, p.r.url("torch")))
        record["variants"].sort(key=lambda v: as_version(v["cuda"]))
    elif variant.get("cudnn") != pins["cudnn"]:
        variant["cudnn"] = pins["cudnn"]


def _pin_words(pins: dict) -> str:
    if not pins["variant"]:
        return "no CUDA wheels"
    return f"{pins['variant']} (CUDA runtime {pins['cuda_runtime']}, cuDNN {pins['cudnn']})"


def _new_torch(p: Planner, records, series, group, pins, metas, url) -> None:
    first = pins[group[0].version]
    same = [r for r in group if pins[r.version] == first]
    for r in group:
        if r not in same:
            p.note(f"! torch {r.version} pins {_pin_words(pins[r.version])}, unlike {group[0].version}: not added")
    prior = prior_record(records, lambda r: as_version(r["series"]), as_version(series))
    if prior is None or not prior.get("variants"):
        p.note(f"torch {series}: no earlier release to carry variants and arch lists from: not added")
        return
    versions = [r.version for r in same]
    python = common_pythons(same)
    variants, how = _torch_variants(p, series, versions, first, prior, python)
    pypi = {"cuda_runtime": first["cuda_runtime"], "cudnn": first["cudnn"],
            "source": sources_of([metas[v].url for v in versions])}
    if not first["variant"]:
        pypi.update(status="unverified", note="the PyPI wheel declares no CUDA wheels; which CUDA it bundles is "
                                              "not in its metadata")
    record = {"series": series, "versions": versions, "python": python, "pypi_default": first["variant"],
              "pypi": pypi, "source": url,
              "note": f"derived from PyPI metadata by `cudabox matrix refresh` ({versions[0]} uploaded "
                      f"{same[0].uploaded})", "variants": variants}
    p.put("torch", "releases", "series", record, None,
          f"new release {', '.join(versions)} ({same[0].uploaded}): PyPI default {_pin_words(first)}; "
          f"{span(python)}; {how}")


# --------------------------------------------------------------------------- torchvision / torchaudio


def companions(p: Planner, name: str) -> None:
    records = section(p.work["torch"], f"companions.{name}")
    floor = data_floor(p, name, [r["version"] for r in records])
    rels = release_candidates(p.r, name, floor)
    metas = p.r.metadata(rels)
    torch_versions = [v for rec in section(p.work["torch"], "releases") for v in rec["versions"]]
    for rel in rels:
        pin = companion_pin(metas[rel.version].requires_dist)
        old = next((r for r in records if r["version"] == rel.version), None)
        if old is not None:
            if not same_spec(old.get("torch"), pin):
                new = dict(old, torch=pin)
                add_source(new, metas[rel.version].url)
                p.put("torch", f"companions.{name}", "version", new, old, f"PyPI pins torch {pin}")
            continue
        if pin and not any(Version(v) in SpecifierSet(pin) for v in torch_versions):
            p.note(f"{name} {rel.version} requires torch {pin}, which the matrix doesn't have: not added "
                   "(refresh torch too)")
            continue
        record = {"version": rel.version, "torch": pin, "source": metas[rel.version].url}
        if pin is None:
            record["note"] = "declares no torch requirement"
        p.put("torch", f"companions.{name}", "version", record, None,
              f"new release ({rel.uploaded}), torch {pin or 'unpinned'}")
