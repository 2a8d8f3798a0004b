"""Per-framework steps of `cudabox matrix refresh`: PyPI facts -> matrix records (docs/refresh.md).

Here: the rules every step shares and the tensorflow, jax and paddle steps (torch and its
companions: `refresh_torch`). Each step reads PyPI through the planner's Reader, builds records in the YAML
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
    Planner,
    PluginNames,
    as_version,
    cuda_majors,
    framework_record,
    jax_plugin_pins,
    jax_plugins,
    plugin_names,
    section,
    series_of,
    tf_and_cuda,
)


def sources_of(*items) -> list[str] | str:
    out = list(dict.fromkeys(s for item in items if item for s in ([item] if isinstance(item, str) else item) if s))
    return out[0] if len(out) == 1 else out


def add_source(record: dict, *urls) -> None:
    old = record.get("source")
    record["source"] = sources_of(old if isinstance(old, list) else [old], *urls)


def common_pythons(rels) -> list[str]:
    """CPython minors every release of the group has Linux x86_64 wheels for."""
    sets = [set(r.pythons) for r in rels if r.pythons]
    return sorted(set.intersection(*sets), key=as_version) if sets else []


def span(pythons) -> str:
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
        rels += release_candidates(p.r, name, floor) if name != "jax" else \
            [r for r in p.r.releases("jax").values() if not r.yanked and as_version(r.version) >= as_version(floor)]
        plugins = plugin_names(p.work["frameworks"], name) if name == "jax" else None
        for plugin in plugins.projects(cuda_majors(p.work["cuda"])) if plugins else ():
            rels += [r for r in p.r.releases(plugin).values() if not r.yanked and as_version(r.version) >= as_version(floor)]
    p.r.metadata(rels)


def release_candidates(reader, name: str, floor: str):
    return [r for r in reader.releases(name).values()
            if not r.yanked and as_version(series_of(r.version)) >= as_version(series_of(floor))]


def prior_record(records: list, key, ident) -> dict | None:
    """The record just before `ident` (by version): where carried facts come from."""
    older = [r for r in records if key(r) < ident]
    return max(older, key=key) if older else None


def merge_versions(p: Planner, what: str, record: dict, group, pins: dict, series_pins, words) -> list[str]:
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


def added_words(group, added) -> str:
    dates = {r.version: r.uploaded for r in group}
    return ("new release " if len(added) == 1 else "new releases ") + ", ".join(f"{v} ({dates[v]})" for v in added) \
        if added else ""


def by_series(rels) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in rels:
        out.setdefault(series_of(r.version), []).append(r)
    return out


def wheel_pythons(record: dict, group, url: str) -> None:
    """A series' Python list = the CPython tags every listed version has Linux x86_64 wheels for (PyPI wins)."""
    python = common_pythons([r for r in group if r.version in record["versions"]])
    if python and python != [str(x) for x in record.get("python") or []]:
        record["python"] = python
        add_source(record, url)



# --------------------------------------------------------------------------- tensorflow


def _tf_words(pins) -> str:
    return f"[and-cuda] CUDA runtime {pins['cuda_runtime']}, cuDNN {pins['cudnn']}" if pins else "no [and-cuda]"


def tensorflow(p: Planner) -> None:
    records = section(p.work["tensorflow"], "releases")
    floor = data_floor(p, "tensorflow", [r["series"] for r in records])
    rels = release_candidates(p.r, "tensorflow", floor)
    metas = p.r.metadata(rels)
    pins = {r.version: tf_and_cuda(metas[r.version].requires_dist) for r in rels}
    url = p.r.url("tensorflow")
    for series, group in sorted(by_series(rels).items(), key=lambda kv: as_version(kv[0])):
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
        added = merge_versions(p, "tensorflow", new, group, pins, series_pins, _tf_words)
        if added and new.get("and_cuda"):
            add_source(new["and_cuda"], *(metas[v].url for v in added))
        wheel_pythons(new, group, url)
        p.put("tensorflow", "releases", "series", new, old, added_words(group, added))


def _same_tf(record: dict | None, pins: dict | None) -> bool:
    if not record or not pins:
        return not record and not pins
    return record.get("cuda_major") == pins["cuda_major"] and all(
        same_spec(record.get(k), pins[k]) for k in ("cuda_runtime", "cudnn"))


def _spec(text: str) -> str:
    return text if text[0] in "=<>!~" else f"=={text}"


def same_spec(a: str | None, b: str | None) -> bool:
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
    prior = prior_record(records, lambda r: as_version(r["series"]), as_version(series))
    if prior is None:
        p.note(f"tensorflow {series}: no earlier release to carry the arch list from: not added")
        return
    versions = [r.version for r in same]
    cuda = series_of(_lowest(first["cuda_runtime"])) if first and first["cuda_runtime"] else prior["cuda"]
    cudnn = series_of(_lowest(first["cudnn"])) if first else prior["cudnn"]
    python = common_pythons(same)
    record = {"series": series, "versions": versions, "python": python, "cuda": cuda, "cudnn": cudnn,
              "and_cuda": dict(first, source=sources_of([metas[v].url for v in versions])) if first else None,
              "sass": list(prior.get("sass") or []), "ptx": list(prior.get("ptx") or []), "source": url,
              "status": "inferred",
              "note": f"derived from PyPI metadata by `cudabox matrix refresh` ({versions[0]} uploaded "
                      f"{same[0].uploaded}): cuda/cudnn are the [and-cuda] pins (the tested configuration is "
                      f"not on PyPI); sass/ptx carried from tensorflow {prior['series']}"}
    p.put("tensorflow", "releases", "series", record, None,
          f"new release {', '.join(versions)} ({same[0].uploaded}): {_tf_words(first)}; {span(python)}; "
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
            if not same_spec(plugin.get("cudnn"), pins["cudnn"]) or plugin.get("cuda_min") != pins["cuda_min"]:
                plugin.update(cudnn=pins["cudnn"], cuda_min=pins["cuda_min"])
                add_source(plugin, pins["url"])
        p.put("jax", "releases", "versions", new, old)
    for rel in rels:
        if rel.version not in known and facts[rel.version]["plugins"]:
            _new_jax(p, records, rel.version, facts[rel.version], p.r.url("jax"), names)


def _new_jax(p: Planner, records, version, facts, url, names: PluginNames) -> None:
    prior = prior_record(records, _jax_key, as_version(version))
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
              "source": sources_of(url, facts["url"]),
              "note": f"derived from PyPI metadata by `cudabox matrix refresh` (uploaded {facts['uploaded']})",
              "plugins": plugins}
    words = "; ".join(f"jax[{x['name']}] cuDNN {x['cudnn']}" for x in plugins)
    p.put("jax", "releases", "versions", record, None,
          f"new release ({facts['uploaded']}): {span(record['python']) if isinstance(record['python'], list) else 'Python ' + str(record['python'])}; {words}; built-with CUDA and min_cc "
          f"carried from {'/'.join(prior['versions']) if prior else '-'} (inferred)")


# --------------------------------------------------------------------------- paddle


def paddle(p: Planner, project: str = "paddlepaddle-gpu") -> None:
    """PyPI's paddlepaddle-gpu: new versions join their series (a series shares its CUDA builds); a new
    series carries the builds of the one before (inferred: the per-CUDA builds live on Paddle's own index,
    which refresh does not read, and the wheels declare no CUDA pins)."""
    project = _pypi_project(p, "paddle") or project
    records = section(p.work["paddle"], "releases")
    floor = data_floor(p, "paddle", [r["series"] for r in records])
    rels = release_candidates(p.r, project, floor)
    url = p.r.url(project)
    for series, group in sorted(by_series(rels).items(), key=lambda kv: as_version(kv[0])):
        old = next((r for r in records if r["series"] == series), None)
        if old is None:
            _new_paddle(p, records, series, group, url)
            continue
        new = copy.deepcopy(old)
        added = [r.version for r in group if r.version not in old["versions"]]
        new["versions"] = sorted(old["versions"] + added, key=as_version)
        wheel_pythons(new, group, url)
        p.put("paddle", "releases", "series", new, old, added_words(group, added))


def _pypi_project(p: Planner, name: str) -> str | None:
    from ..overlay import pypi_project

    return pypi_project(p.work["frameworks"], name)


def _new_paddle(p: Planner, records, series, group, url) -> None:
    prior = prior_record(records, lambda r: as_version(r["series"]), as_version(series))
    if prior is None:
        p.note(f"paddle {series}: no earlier release to carry the CUDA builds from: not added")
        return
    versions = [r.version for r in group]
    python = common_pythons(group)
    record = {"series": series, "versions": versions, "python": python or prior.get("python"),
              "pypi_default": prior.get("pypi_default"), "source": url, "status": "inferred",
              "note": f"derived from PyPI by `cudabox matrix refresh` ({versions[0]} uploaded {group[0].uploaded}): "
                      f"CUDA builds, cuDNN and post tags carried from paddle {prior['series']} (Paddle's index "
                      "not read)",
              "variants": copy.deepcopy(prior["variants"])}
    p.put("paddle", "releases", "series", record, None,
          f"new release {', '.join(versions)} ({group[0].uploaded}); {span(python)}; CUDA builds carried from "
          f"{prior['series']} (inferred)")
