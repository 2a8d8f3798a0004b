"""Per-framework steps of `cudabox matrix refresh`: PyPI facts -> matrix records (docs/refresh.md).

Each step reads PyPI through the planner's Reader, builds records in the YAML
shapes of docs/matrices.md and hands them to `Planner.put`. Rules shared by all:

* a release is considered when its series is at least the oldest the matrix
  knows, it is final (no rc/dev/post) and not yanked;
* facts PyPI states (pins, Requires-Python, wheel tags) overwrite the record's;
  facts it can't state are carried from the previous release: `status: inferred`
  and a `note` naming that release;
* a release whose pins differ from its series record is not merged into it
  (the schema has one pin per series): it is reported instead.
"""

from __future__ import annotations

import copy

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .reader import (
    PYTORCH_INDEX,
    Planner,
    PluginNames,
    as_version,
    companion_pin,
    cuda_majors,
    framework_record,
    jax_plugin_pins,
    jax_plugins,
    plugin_names,
    section,
    series_of,
    tf_and_cuda,
    torch_pins,
    variant_cuda,
)


def _sources(*items) -> list[str] | str:
    out = list(dict.fromkeys(s for item in items if item for s in ([item] if isinstance(item, str) else item) if s))
    return out[0] if len(out) == 1 else out


def _add_source(record: dict, *urls) -> None:
    old = record.get("source")
    record["source"] = _sources(old if isinstance(old, list) else [old], *urls)


def _pythons(rels) -> list[str]:
    """CPython minors every release of the group has Linux x86_64 wheels for."""
    sets = [set(r.pythons) for r in rels if r.pythons]
    return sorted(set.intersection(*sets), key=as_version) if sets else []


def _span(pythons) -> str:
    return f"Python {pythons[0]}-{pythons[-1]}" if pythons else "Python ?"


def data_floor(p: Planner, name: str, known) -> str:
    """The oldest version to consider: sources.yaml `refresh.floors` or the oldest the matrix knows."""
    floors = ((p.work.get("sources") or {}).get("refresh") or {}).get("floors") or {}
    candidates = [str(v) for v in (floors.get(name), *known) if v is not None]
    return min(candidates, key=as_version, default="0")


def prefetch(p: Planner, selected) -> None:
    """Read every wheel METADATA the steps will need in one parallel pass, so one slow file doesn't stall
    each framework in turn (a cold refresh is mostly waiting on PyPI)."""
    known = {"torch": [r["series"] for r in section(p.work["torch"], "releases")],
             "torchvision": [r["version"] for r in section(p.work["torch"], "companions.torchvision")],
             "torchaudio": [r["version"] for r in section(p.work["torch"], "companions.torchaudio")],
             "tensorflow": [r["series"] for r in section(p.work["tensorflow"], "releases")],
             "jax": [v for r in section(p.work["jax"], "releases") for v in r["versions"]]}
    rels = []
    for name in [n for n in known if n in selected]:
        floor = data_floor(p, name, known[name])
        rels += _candidates(p.r, name, floor) if name != "jax" else \
            [r for r in p.r.releases("jax").values() if not r.yanked and as_version(r.version) >= as_version(floor)]
        plugins = plugin_names(p.work["frameworks"], name) if name == "jax" else None
        for plugin in plugins.projects(cuda_majors(p.work["cuda"])) if plugins else ():
            rels += [r for r in p.r.releases(plugin).values() if not r.yanked and as_version(r.version) >= as_version(floor)]
    p.r.metadata(rels)


def _candidates(reader, name: str, floor: str):
    return [r for r in reader.releases(name).values()
            if not r.yanked and as_version(series_of(r.version)) >= as_version(series_of(floor))]


def _prior(records: list, key, ident) -> dict | None:
    """The record just before `ident` (by version): where carried facts come from."""
    older = [r for r in records if key(r) < ident]
    return max(older, key=key) if older else None


def _merge_versions(p: Planner, what: str, record: dict, group, pins: dict, series_pins, words) -> list[str]:
    """Add the group's releases missing from a series record when they pin what the series pins."""
    added = []
    for rel in group:
        if rel.version in record["versions"]:
            continue
        if pins[rel.version] != series_pins:
            p.note(f"! {what} {rel.version} pins {words(pins[rel.version])}, series {record['series']} pins "
                   f"{words(series_pins)}: not added (one pin per series; edit the overlay by hand)")
            continue
        record["versions"] = sorted(record["versions"] + [rel.version], key=as_version)
        added.append(rel.version)
    return added


def _added_words(group, added) -> str:
    dates = {r.version: r.uploaded for r in group}
    return ("new release " if len(added) == 1 else "new releases ") + ", ".join(f"{v} ({dates[v]})" for v in added) \
        if added else ""


def _groups(rels) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in rels:
        out.setdefault(series_of(r.version), []).append(r)
    return out


# --------------------------------------------------------------------------- torch


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
            "ptx": list(model.get("ptx") or []), "source": _sources(url, PYTORCH_INDEX if listed else None),
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
    own = [f"{v['name']} {_span(v['python'])}" for v in variants if v.get("python")]
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
    _add_source(variant, PYTORCH_INDEX)


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
    rels = _candidates(p.r, "torch", floor)
    metas = p.r.metadata(rels)
    pins = {r.version: torch_pins(metas[r.version].requires_dist) for r in rels}
    url = p.r.url("torch")
    for series, group in sorted(_groups(rels).items(), key=lambda kv: as_version(kv[0])):
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
            _add_source(pypi, metas[(known or group)[0].version].url)
            _fix_default_variant(p, new, series_pins, records)
        added = _merge_versions(p, "torch", new, group, pins, series_pins, _pin_words)
        for v in added:
            _add_source(pypi, metas[v].url)
        _wheel_pythons(new, group, url)
        _index_variant_pythons(p, new)
        p.put("torch", "releases", "series", new, old, _added_words(group, added))


def _wheel_pythons(record: dict, group, url: str) -> None:
    """A series' Python list = the CPython tags every listed version has Linux x86_64 wheels for (PyPI wins)."""
    python = _pythons([r for r in group if r.version in record["versions"]])
    if python and python != [str(x) for x in record.get("python") or []]:
        record["python"] = python
        _add_source(record, url)


def _fix_default_variant(p: Planner, record: dict, pins: dict, records: list) -> None:
    variant = next((v for v in record["variants"] if v["name"] == pins["variant"]), None)
    if pins["variant"] is None:
        return
    if variant is None:
        prior = _prior(records, lambda r: as_version(r["series"]), as_version(record["series"])) or record
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
    prior = _prior(records, lambda r: as_version(r["series"]), as_version(series))
    if prior is None or not prior.get("variants"):
        p.note(f"torch {series}: no earlier release to carry variants and arch lists from: not added")
        return
    versions = [r.version for r in same]
    python = _pythons(same)
    variants, how = _torch_variants(p, series, versions, first, prior, python)
    pypi = {"cuda_runtime": first["cuda_runtime"], "cudnn": first["cudnn"],
            "source": _sources([metas[v].url for v in versions])}
    if not first["variant"]:
        pypi.update(status="unverified", note="the PyPI wheel declares no CUDA wheels; which CUDA it bundles is "
                                              "not in its metadata")
    record = {"series": series, "versions": versions, "python": python, "pypi_default": first["variant"],
              "pypi": pypi, "source": url,
              "note": f"derived from PyPI metadata by `cudabox matrix refresh` ({versions[0]} uploaded "
                      f"{same[0].uploaded})", "variants": variants}
    p.put("torch", "releases", "series", record, None,
          f"new release {', '.join(versions)} ({same[0].uploaded}): PyPI default {_pin_words(first)}; "
          f"{_span(python)}; {how}")


# --------------------------------------------------------------------------- torchvision / torchaudio


def companions(p: Planner, name: str) -> None:
    records = section(p.work["torch"], f"companions.{name}")
    floor = data_floor(p, name, [r["version"] for r in records])
    rels = _candidates(p.r, name, floor)
    metas = p.r.metadata(rels)
    torch_versions = [v for rec in section(p.work["torch"], "releases") for v in rec["versions"]]
    for rel in rels:
        pin = companion_pin(metas[rel.version].requires_dist)
        old = next((r for r in records if r["version"] == rel.version), None)
        if old is not None:
            if not _same_spec(old.get("torch"), pin):
                new = dict(old, torch=pin)
                _add_source(new, metas[rel.version].url)
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


# --------------------------------------------------------------------------- tensorflow


def _tf_words(pins) -> str:
    return f"[and-cuda] CUDA runtime {pins['cuda_runtime']}, cuDNN {pins['cudnn']}" if pins else "no [and-cuda]"


def tensorflow(p: Planner) -> None:
    records = section(p.work["tensorflow"], "releases")
    floor = data_floor(p, "tensorflow", [r["series"] for r in records])
    rels = _candidates(p.r, "tensorflow", floor)
    metas = p.r.metadata(rels)
    pins = {r.version: tf_and_cuda(metas[r.version].requires_dist) for r in rels}
    url = p.r.url("tensorflow")
    for series, group in sorted(_groups(rels).items(), key=lambda kv: as_version(kv[0])):
        old = next((r for r in records if r["series"] == series), None)
        if old is None:
            _new_tf(p, records, series, group, pins, metas, url)
            continue
        new = copy.deepcopy(old)
        known = [r for r in group if r.version in old["versions"]] or group
        series_pins = pins[known[0].version]
        current = old.get("and_cuda")
        if not _same_tf(current, series_pins):
            new["and_cuda"] = dict(series_pins, source=metas[known[0].version].url) if series_pins else None
        added = _merge_versions(p, "tensorflow", new, group, pins, series_pins, _tf_words)
        if added and new.get("and_cuda"):
            _add_source(new["and_cuda"], *(metas[v].url for v in added))
        _wheel_pythons(new, group, url)
        p.put("tensorflow", "releases", "series", new, old, _added_words(group, added))


def _same_tf(record: dict | None, pins: dict | None) -> bool:
    if not record or not pins:
        return not record and not pins
    return record.get("cuda_major") == pins["cuda_major"] and all(
        _same_spec(record.get(k), pins[k]) for k in ("cuda_runtime", "cudnn"))


def _spec(text: str) -> str:
    return text if text[0] in "=<>!~" else f"=={text}"


def _same_spec(a: str | None, b: str | None) -> bool:
    """Same requirement however spelt ("9.1.0.70" / "==9.1.0.70", "<10.0,>=9.8" / ">=9.8,<10")."""
    if not a or not b:
        return not a and not b
    return SpecifierSet(_spec(a)) == SpecifierSet(_spec(b))


def _lowest(spec: str | None) -> str | None:
    return next((s.version for s in SpecifierSet(_spec(spec)) if s.operator in ("==", ">=", "~=")), None) \
        if spec else None


def _new_tf(p: Planner, records, series, group, pins, metas, url) -> None:
    first = pins[group[0].version]
    same = [r for r in group if pins[r.version] == first]
    prior = _prior(records, lambda r: as_version(r["series"]), as_version(series))
    if prior is None:
        p.note(f"tensorflow {series}: no earlier release to carry the arch list from: not added")
        return
    versions = [r.version for r in same]
    cuda = series_of(_lowest(first["cuda_runtime"])) if first and first["cuda_runtime"] else prior["cuda"]
    cudnn = series_of(_lowest(first["cudnn"])) if first else prior["cudnn"]
    python = _pythons(same)
    record = {"series": series, "versions": versions, "python": python, "cuda": cuda, "cudnn": cudnn,
              "and_cuda": dict(first, source=_sources([metas[v].url for v in versions])) if first else None,
              "sass": list(prior.get("sass") or []), "ptx": list(prior.get("ptx") or []), "source": url,
              "status": "inferred",
              "note": f"derived from PyPI metadata by `cudabox matrix refresh` ({versions[0]} uploaded "
                      f"{same[0].uploaded}): cuda/cudnn are the [and-cuda] pins (the tested configuration is "
                      f"not on PyPI); sass/ptx carried from tensorflow {prior['series']}"}
    p.put("tensorflow", "releases", "series", record, None,
          f"new release {', '.join(versions)} ({same[0].uploaded}): {_tf_words(first)}; {_span(python)}; "
          f"arch list carried from {prior['series']} (inferred)")


# --------------------------------------------------------------------------- jax


def _jax_facts(p: Planner, rels, names: PluginNames) -> dict[str, dict]:
    """Per jax version: Requires-Python and, per cudaNN extra, the plugin's pins."""
    metas = p.r.metadata(rels)
    wanted: dict[str, list] = {}
    plan = {}
    for rel in rels:
        extras = {}
        for extra, spec in jax_plugins(metas[rel.version].requires_dist, names).items():
            plugin = [r for r in p.r.releases(names.project(extra)).values() if not r.yanked and r.version in spec]
            if plugin:
                extras[extra] = max(plugin, key=lambda r: as_version(r.version))
                wanted.setdefault(extra, []).append(extras[extra])
        plan[rel.version] = extras
    plugin_meta = {extra: p.r.metadata(list({r.version: r for r in rs}.values())) for extra, rs in wanted.items()}
    out = {}
    python_from = framework_record(p.work["frameworks"], "jax").get("python_from")
    jaxlib = p.r.releases(python_from) if python_from else {}
    for rel in rels:
        plugins = {}
        for extra, r in plan[rel.version].items():
            pins = dict(jax_plugin_pins(plugin_meta[extra][r.version].requires_dist), url=plugin_meta[extra][r.version].url)
            if pins["cudnn"] is None:  # jax <= 0.4.28: the pins are jax's own under the extra
                pins = dict(jax_plugin_pins(metas[rel.version].requires_dist, extra), url=metas[rel.version].url)
            plugins[extra] = pins
        lib = jaxlib.get(rel.version)  # jax is pure Python: its Pythons are jaxlib's wheel tags
        python = list(lib.pythons) if lib and lib.pythons else metas[rel.version].requires_python
        out[rel.version] = {"python": python, "url": metas[rel.version].url,
                            "plugins": plugins, "uploaded": rel.uploaded}
    return out


def _common_python(pythons: list):
    """The Pythons every version of a record has wheels for (lists intersect; a specifier is kept as is)."""
    if pythons and all(isinstance(x, list) for x in pythons):
        common = set.intersection(*(set(x) for x in pythons))
        return sorted(common, key=as_version) or None
    return pythons[0] if pythons else None


def _jax_key(record) -> Version:
    return max(as_version(v) for v in record["versions"])


def jax(p: Planner) -> None:
    records = section(p.work["jax"], "releases")
    known = {v for r in records for v in r["versions"]}
    floor = data_floor(p, "jax", known)
    rels = [r for r in p.r.releases("jax").values() if not r.yanked and as_version(r.version) >= as_version(floor)]
    names = plugin_names(p.work["frameworks"], "jax")
    if names is None:
        p.note("jax: frameworks.yaml names no plugin_package: its CUDA plugins can't be read")
        return
    facts = _jax_facts(p, rels, names)
    for old in list(records):
        got = [facts[v] for v in old["versions"] if v in facts]
        if not got:
            continue
        shape = [{k: (v["cudnn"], v["cuda_min"]) for k, v in f["plugins"].items()} for f in got]
        if any(s != shape[0] for s in shape):
            p.note(f"! jax {'/'.join(old['versions'])}: the versions' PyPI metadata differ; record left as is")
            continue
        new = copy.deepcopy(old)
        python = _common_python([f["python"] for f in got])
        if python and python != new.get("python"):
            new["python"] = python
        for plugin in new["plugins"]:
            pins = got[0]["plugins"].get(plugin["name"])
            if pins is None:
                p.note(f"! jax {'/'.join(old['versions'])}: PyPI has no jax-{plugin['name']}-plugin for it")
                continue
            if not _same_spec(plugin.get("cudnn"), pins["cudnn"]) or plugin.get("cuda_min") != pins["cuda_min"]:
                plugin.update(cudnn=pins["cudnn"], cuda_min=pins["cuda_min"])
                _add_source(plugin, pins["url"])
        p.put("jax", "releases", "versions", new, old)
    for rel in rels:
        if rel.version not in known and facts[rel.version]["plugins"]:
            _new_jax(p, records, rel.version, facts[rel.version], p.r.url("jax"), names)


def _new_jax(p: Planner, records, version, facts, url, names: PluginNames) -> None:
    prior = _prior(records, _jax_key, as_version(version))
    plugins = []
    for name, pins in sorted(facts["plugins"].items()):
        model = next((x for x in (prior or {}).get("plugins", []) if x["name"] == name), None)
        plugin = {"name": name, "cuda_major": names.major(name), "cuda": model.get("cuda") if model else None,
                  "cuda_min": pins["cuda_min"] or (model or {}).get("cuda_min"), "cudnn": pins["cudnn"],
                  "min_cc": model.get("min_cc") if model else None, "source": pins["url"]}
        plugin["status"] = "inferred" if model else "unverified"
        plugin["note"] = (f"cuda (built with) and min_cc carried from jax {'/'.join(prior['versions'])} (not on "
                          "PyPI)") if model else "first release with this plugin: built-with CUDA and min_cc unknown"
        plugins.append(plugin)
    record = {"versions": [version], "python": facts["python"] or (prior or {}).get("python"),
              "source": _sources(url, facts["url"]),
              "note": f"derived from PyPI metadata by `cudabox matrix refresh` (uploaded {facts['uploaded']})",
              "plugins": plugins}
    words = "; ".join(f"jax[{x['name']}] cuDNN {x['cudnn']}" for x in plugins)
    p.put("jax", "releases", "versions", record, None,
          f"new release ({facts['uploaded']}): {_span(record['python']) if isinstance(record['python'], list) else 'Python ' + str(record['python'])}; {words}; built-with CUDA and min_cc "
          f"carried from {'/'.join(prior['versions']) if prior else '-'} (inferred)")


# --------------------------------------------------------------------------- paddle


def paddle(p: Planner, project: str = "paddlepaddle-gpu") -> None:
    """PyPI's paddlepaddle-gpu: new versions join their series (a series shares its CUDA builds); a new
    series carries the builds of the one before (inferred: the per-CUDA builds live on Paddle's own index,
    which refresh does not read, and the wheels declare no CUDA pins)."""
    project = _pypi_project(p, "paddle") or project
    records = section(p.work["paddle"], "releases")
    floor = data_floor(p, "paddle", [r["series"] for r in records])
    rels = _candidates(p.r, project, floor)
    url = p.r.url(project)
    for series, group in sorted(_groups(rels).items(), key=lambda kv: as_version(kv[0])):
        old = next((r for r in records if r["series"] == series), None)
        if old is None:
            _new_paddle(p, records, series, group, url)
            continue
        new = copy.deepcopy(old)
        added = [r.version for r in group if r.version not in old["versions"]]
        new["versions"] = sorted(old["versions"] + added, key=as_version)
        _wheel_pythons(new, group, url)
        p.put("paddle", "releases", "series", new, old, _added_words(group, added))


def _pypi_project(p: Planner, name: str) -> str | None:
    from ..overlay import pypi_project

    return pypi_project(p.work["frameworks"], name)


def _new_paddle(p: Planner, records, series, group, url) -> None:
    prior = _prior(records, lambda r: as_version(r["series"]), as_version(series))
    if prior is None:
        p.note(f"paddle {series}: no earlier release to carry the CUDA builds from: not added")
        return
    versions = [r.version for r in group]
    python = _pythons(group)
    record = {"series": series, "versions": versions, "python": python or prior.get("python"),
              "pypi_default": prior.get("pypi_default"), "source": url, "status": "inferred",
              "note": f"derived from PyPI by `cudabox matrix refresh` ({versions[0]} uploaded {group[0].uploaded}): "
                      f"CUDA builds, cuDNN and post tags carried from paddle {prior['series']} (Paddle's index "
                      "not read)",
              "variants": copy.deepcopy(prior["variants"])}
    p.put("paddle", "releases", "series", record, None,
          f"new release {', '.join(versions)} ({group[0].uploaded}); {_span(python)}; CUDA builds carried from "
          f"{prior['series']} (inferred)")
