"""Read a fleet inventory: which GPU model and which driver each node has.

Three formats, detected from the content, because platform teams already have
one of them at hand (docs/fleet.md):

* YAML: a list of `{name, driver, gpu, count?}` (or `{nodes: [...]}`);
* `kubectl get nodes -o json`: NVIDIA GPU Feature Discovery labels
  (`nvidia.com/gpu.product`, `nvidia.com/cuda.driver-version.*`,
  `nvidia.com/gpu.compute.major/minor`, `nvidia.com/gpu.count`);
* `scontrol show nodes` (multi-line or `-o`) or `sinfo -N -h -o "%N %G %f"`:
  the GPU from `Gres=gpu:TYPE:N`, the driver from a node feature or comment
  `driver_535.104.05` (Slurm has no driver field), else `--driver`.

Nodes without GPUs are skipped; a GPU or driver that can't be read is an
InputError naming the node, never a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..files import Node as YamlNode, display_path, load_yaml, read_input_text
from ..knowledge.matrix import Matrix
from ..knowledge.model import GPU, DriverVersion

_DRIVER_TOKEN = re.compile(r"(?:^|[,\s])(?:nvidia[_-]?)?driver[_=:-]?(\d{3}(?:\.\d{1,3}){0,2})(?=$|[,\s])", re.I)
_KV_SPLIT = re.compile(r"\s+(?=[A-Za-z][A-Za-z0-9_/:]*=)")
_GRES = re.compile(r"gpu(?::([A-Za-z0-9_.-]+?))?:(\d+)(?:\([^)]*\))?(?=$|,)")
GFD = "nvidia.com/"


@dataclass(frozen=True)
class Node:
    """One machine: its GPU model (a matrix record), how many, and its driver."""

    name: str
    gpu: GPU
    driver: DriverVersion
    count: int = 1
    where: str = ""  # file:line or file: node NAME, for messages

    @property
    def klass(self) -> tuple[str, str]:
        """Nodes with the same GPU and driver behave the same: the unit of the plan."""
        return self.gpu.name, self.driver.text


@dataclass(frozen=True)
class Options:
    default_driver: str | None = None  # --driver: for formats that carry none (Slurm)
    gres_map: tuple[tuple[str, str], ...] = ()  # --gres-map TYPE=GPU, for Slurm GRES type names


def read_inventory(path: Path, m: Matrix, options: Options = Options()) -> list[Node]:
    path = Path(path)
    shown = display_path(path)
    text = read_input_text(path, shown=shown)  # bounded: a device, a directory or a huge file is exit 2
    stripped = "\n".join(ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")).lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{shown}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        nodes = _from_kubectl(doc, shown, m, options)
    elif re.search(r"^\s*NodeName=", text, re.M):
        nodes = _from_scontrol(text, shown, m, options)
    elif stripped.startswith(("-", "nodes:", "[")):
        nodes = _from_yaml(load_yaml(path, text), shown, m, options)
    else:
        nodes = _from_sinfo(text, shown, m, options)
    if not nodes:
        raise InputError(f"{shown}: no GPU node found (see docs/fleet.md for the formats)")
    return nodes


def _driver(text, where: str, options: Options) -> DriverVersion:
    value = text if text not in (None, "") else options.default_driver
    if value in (None, ""):
        raise InputError(f"{where}: no driver version (give one, or a default with --driver)")
    try:
        return DriverVersion.parse(str(value))
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def _gpu(name: str, m: Matrix, where: str, options: Options, cc: str | None = None) -> GPU:
    mapped = dict((k.lower(), v) for k, v in options.gres_map).get(str(name).lower(), name)
    found = m.find_gpu(mapped) or m.find_gpu(str(mapped).replace("_", " "))
    if found is None and cc:
        found = m.gpu(cc, where=where)
    # m.gpu reads `sm_80` / `8.0` too, and raises with the closest names otherwise
    return found or m.gpu(mapped, where=f"{where} (map Slurm GRES types with --gres-map TYPE=GPU)")


# --------------------------------------------------------------------------- YAML


def _from_yaml(doc, shown: str, m: Matrix, options: Options) -> list[Node]:
    items = doc.get("nodes") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise InputError(f"{shown}: expected a list of {{name, driver, gpu, count}} (or nodes: [...])")
    nodes = []
    for i, item in enumerate(items):
        line = items.line_of(i) if hasattr(items, "line_of") else None
        where = f"{shown}:{line}" if line else shown
        if not isinstance(item, YamlNode) and not isinstance(item, dict):
            raise InputError(f"{where}: expected a mapping with name, driver, gpu")
        unknown = sorted(set(item) - {"name", "driver", "gpu", "count"})
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r} (known: name, driver, gpu, count)")
        if not item.get("gpu"):
            raise InputError(f"{where}: 'gpu' is required (a GPU model, e.g. A100)")
        count = item.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InputError(f"{where}: 'count' must be a positive integer")
        nodes.append(Node(name=str(item.get("name") or f"node{i + 1}"), gpu=_gpu(item["gpu"], m, where, options),
                          driver=_driver(item.get("driver"), where, options), count=count, where=where))
    return nodes


# --------------------------------------------------------------------------- kubectl get nodes -o json


def _from_kubectl(doc, shown: str, m: Matrix, options: Options) -> list[Node]:
    items = doc.get("items") if isinstance(doc, dict) and "items" in doc else [doc]
    nodes = []
    for item in items:
        meta = item.get("metadata") or {}
        name = meta.get("name", "?")
        labels = meta.get("labels") or {}
        where = f"{shown}: node {name}"
        product = labels.get(GFD + "gpu.product")
        cc_major, cc_minor = labels.get(GFD + "gpu.compute.major"), labels.get(GFD + "gpu.compute.minor")
        if not product and not cc_major:
            continue  # a CPU node (no GFD labels)
        cc = f"{cc_major}.{cc_minor or 0}" if cc_major else None
        product = re.sub(r"-(SHARED|MIG-.*)$", "", product or "")
        gpu = _gpu(product, m, where, options, cc=cc) if product else m.gpu(cc, where=where)
        capacity = (item.get("status") or {}).get("capacity") or {}
        count = labels.get(GFD + "gpu.count") or capacity.get(GFD + "gpu") or 1
        nodes.append(Node(name=name, gpu=gpu, driver=_driver(_gfd_driver(labels), where, options),
                          count=int(count), where=where))
    return nodes


def _gfd_driver(labels: dict) -> str | None:
    full = labels.get(GFD + "cuda.driver-version.full")
    if full:
        return full
    for prefix in ("cuda.driver-version.", "cuda.driver."):  # current GFD, then GFD < 0.15
        major = labels.get(GFD + prefix + "major")
        if major:
            parts = [major, labels.get(GFD + prefix + "minor"),
                     labels.get(GFD + prefix + "revision") or labels.get(GFD + prefix + "rev")]
            return ".".join(p for p in parts if p)
    return None


# --------------------------------------------------------------------------- Slurm


def _from_scontrol(text: str, shown: str, m: Matrix, options: Options) -> list[Node]:
    blocks = re.split(r"\n(?=NodeName=)|\n\s*\n", text.strip())
    nodes = []
    for block in blocks:
        fields = {}
        for line in block.splitlines():
            for part in _KV_SPLIT.split(line.strip()):
                key, _, value = part.partition("=")
                fields.setdefault(key, value)
        if "NodeName" not in fields:
            continue
        features = ",".join(fields.get(k, "") for k in ("ActiveFeatures", "AvailableFeatures", "Features", "Comment"))
        nodes += _slurm_node(fields["NodeName"], fields.get("Gres", ""), features, shown, m, options)
    return nodes


def _from_sinfo(text: str, shown: str, m: Matrix, options: Options) -> list[Node]:
    nodes = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] in ("NODELIST", "HOSTNAMES"):
            continue
        if len(parts) < 2:
            raise InputError(f"{shown}: expected `sinfo -N -h -o \"%N %G %f\"` lines (node, GRES, features), "
                             f"got {line.strip()!r}")
        nodes += _slurm_node(parts[0], parts[1], " ".join(parts[2:]), shown, m, options)
    return nodes


def _slurm_node(name: str, gres: str, features: str, shown: str, m: Matrix, options: Options) -> list[Node]:
    where = f"{shown}: node {name}"
    match = _GRES.search(gres or "")
    if not match or gres in ("(null)", ""):
        return []
    gpu_type, count = match.group(1), int(match.group(2))
    if not gpu_type:
        candidates = [f for f in re.split(r"[,\s]+", features) if f and m.find_gpu(f)]
        if not candidates:
            raise InputError(f"{where}: Gres={gres} names no GPU type; add one (gpu:a100:4) or a feature naming "
                             "the model")
        gpu_type = candidates[0]
    driver = _DRIVER_TOKEN.search(features or "")
    return [Node(name=name, gpu=_gpu(gpu_type, m, where, options), count=count,
                 driver=_driver(driver.group(1) if driver else None, where, options), where=where)]
