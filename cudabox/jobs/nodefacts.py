"""The matrix facts `cudabox check` judges a node by: each GPU's datasheet peaks, the pass thresholds,
and each CUDA major's minimum driver (minor-version compatibility).

With cudabox's dependencies installed they come from the full matrix (overlays included). On a bare
GPU node (a Python with torch or jax but without PyYAML or packaging) `cudabox check` must still run,
so the bundled gpus.yaml and cuda.yaml are then read with PyYAML if present, else with a reader for
the flat records those two files hold (tests/test_check.py holds that both readers agree).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CudaboxError
from ..files import read_input_text
from ..knowledge.names import normalize_gpu_name


@dataclass(frozen=True)
class GpuFacts:
    name: str
    cc: str
    peak_fp16_tflops: float | None = None
    peak_bandwidth_gbs: float | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Facts:
    gpus: tuple[GpuFacts, ...] = ()
    thresholds: dict | None = None  # {"gemm_pass": 0.5, "bandwidth_pass": 0.6}
    minor_compat: dict = field(default_factory=dict)  # CUDA major -> lowest driver that runs every minor
    source: str = ""  # where they came from, for the report

    def find(self, name: str) -> GpuFacts | None:
        """The record for an NVML name ("NVIDIA H100 80GB HBM3"), by name or alias, as the matrix matches."""
        key = normalize_gpu_name(name)
        for gpu in self.gpus:
            if key in {normalize_gpu_name(n) for n in (gpu.name, *gpu.aliases)}:
                return gpu
        return None


def load_facts(project: Path | None = None) -> Facts:
    """From the full matrix when cudabox's dependencies import, else from the bundled files alone."""
    try:
        from ..knowledge.loader import load
    except ImportError as exc:  # a bare node: no PyYAML/packaging
        from .. import paths

        return facts_from_files(paths.matrices_dir(), why=f"bundled matrix files ({(exc.name or 'a dependency').split('.')[0]} not installed)")
    return facts_from_matrix(load(project))


def facts_from_matrix(m) -> Facts:
    gpus = tuple(GpuFacts(g.name, g.cc, g.peak_fp16_tflops, g.peak_bandwidth_gbs, tuple(g.aliases)) for g in m.gpus)
    thresholds = None if m.thresholds is None else {"gemm_pass": m.thresholds.gemm_pass,
                                                    "bandwidth_pass": m.thresholds.bandwidth_pass}
    compat = {major: str(rec.minor_compat_driver) for major, rec in m.majors.items()}
    return Facts(gpus, thresholds, compat, "the matrix (matrices/ and overlays)")


def facts_from_files(directory: Path, *, why: str = "bundled matrix files", use_yaml: bool = True) -> Facts:
    """gpus.yaml and cuda.yaml of DIRECTORY; an unreadable file gives no facts, never an error."""
    loads = _yaml_loader() if use_yaml else None
    docs = {}
    for name in ("gpus", "cuda"):
        try:  # bounded (files.py needs no PyYAML: a bare GPU node has it)
            text = read_input_text(Path(directory) / f"{name}.yaml")
        except CudaboxError:
            continue
        docs[name] = loads(text) if loads else {"gpus": {"gpus": flat_records(text, "gpus"),
                                                          "thresholds": _flow_map(text, "thresholds")},
                                                 "cuda": {"majors": flat_records(text, "majors")}}[name]
    gpu_doc, cuda_doc = docs.get("gpus") or {}, docs.get("cuda") or {}
    gpus = tuple(GpuFacts(str(g["name"]), str(g["cc"]), _number(g.get("peak_fp16_tflops")),
                          _number(g.get("peak_bandwidth_gbs")), tuple(str(a) for a in g.get("aliases") or ()))
                 for g in gpu_doc.get("gpus") or () if isinstance(g, dict) and g.get("name") and g.get("cc"))
    raw = gpu_doc.get("thresholds") or {}
    thresholds = {k: float(raw[k]) for k in ("gemm_pass", "bandwidth_pass") if _number(raw.get(k)) is not None}
    compat = {int(r["major"]): str(r["minor_compat_driver"]) for r in cuda_doc.get("majors") or ()
              if isinstance(r, dict) and r.get("major") is not None and r.get("minor_compat_driver")}
    source = f"{why}{'' if loads else ', read without PyYAML'}"
    return Facts(gpus, thresholds or None, compat, source)


def _yaml_loader():
    try:
        import yaml
    except ImportError:
        return None
    return yaml.safe_load


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- the reader without PyYAML

_ITEM = re.compile(r"^  - ([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$")
_FIELD = re.compile(r"^    ([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$")


def flat_records(text: str, key: str) -> list[dict]:
    """The records of the top-level list KEY, each a block of `  - k: v` / `    k: v` lines with plain
    values (numbers, null, strings, [flow, lists]); what it can't read it leaves out."""
    records, inside = [], False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            inside = line.split(":")[0] == key
            continue
        if not inside:
            continue
        m = _ITEM.match(line)
        if m:
            records.append({m.group(1): _value(m.group(2))})
            continue
        m = _FIELD.match(line)
        if m and records:
            records[-1][m.group(1)] = _value(m.group(2))
    return records


def _flow_map(text: str, key: str) -> dict:
    """`key: {a: 1, b: 2, ...}` on one top-level line: its plain numeric entries."""
    m = re.search(rf"^{re.escape(key)}:\s*\{{(.*)\}}\s*$", text, re.M)
    if not m:
        return {}
    return {k: float(v) for k, v in re.findall(r"(?:^|,)\s*([A-Za-z_]+):\s*(-?\d+(?:\.\d+)?)\s*(?=,|$)", m.group(1))}


def _value(text: str):
    text = _strip_comment(text.strip())
    if text in ("", "null", "~"):
        return None
    if text.startswith("["):
        return [_value(part) for part in _split_flow(text[1:-1])] if text.endswith("]") else None
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            return None
    if text.startswith("'"):
        return text[1:-1].replace("''", "'") if text.endswith("'") else None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def _strip_comment(text: str) -> str:
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and (quote == "'" or text[i - 1] != "\\"):
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] == " "):
            return text[:i].rstrip()
    return text


def _split_flow(text: str) -> list[str]:
    parts, current, quote = [], "", None
    for i, ch in enumerate(text):
        if quote:
            current += ch
            if ch == quote and (quote == "'" or text[i - 1] != "\\"):
                quote = None
        elif ch in "\"'":
            quote, current = ch, current + ch
        elif ch == ",":
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts
