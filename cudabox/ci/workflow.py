"""CI for the image catalog: a GitHub Actions matrix, a docker-bake.json and the workflow, all from images/.

Everything here reads the catalog as `cudabox images generate` wrote it
(images/<framework>/<tag>/stack.json and Dockerfile), so the matrix, the bake
file and .github/workflows/images.yml can't disagree with the images they
build; `cudabox ci check` fails when the committed workflow drifts from what
`cudabox ci workflow` would write. The workflow's shape (actions and their
versions, runner labels) lives in templates/images-workflow.yml.j2, not here.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import operator
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import paths
from ..errors import CudaboxError, InputError
from ..files import read_input_text
from ..resolve.stack import Stack

WORKFLOW = Path(".github/workflows/images.yml")
TEMPLATE = "images-workflow.yml.j2"
DEFAULT_RUNNER = ("self-hosted", "linux", "x64", "gpu")


@dataclass(frozen=True)
class CatalogImage:
    framework: str
    tag: str
    stack: Stack
    stack_hash: str

    @property
    def path(self) -> str:
        return f"{self.framework}/{self.tag}"

    @property
    def image(self) -> str:
        """The catalog name (stack.json "image"): cuda:cuda-12.8-py3.11."""
        return f"{self.framework}:{self.tag}"

    @property
    def id(self) -> str:
        """A name safe for bake targets, artifact and file names: cuda-cuda-12-8-py3-11."""
        return re.sub(r"[^A-Za-z0-9_-]+", "-", f"{self.framework}-{self.tag}")

    @property
    def version(self) -> str:
        return self.stack.frameworks[0].version if self.stack.frameworks else self.stack.cuda

    def fields(self) -> dict[str, str]:
        s = self.stack
        return {"framework": self.framework, "tag": self.tag, "image": self.path, "cuda": s.cuda,
                "python": s.python, "flavour": s.flavour, "version": self.version, "cudnn": s.cudnn or ""}


def catalog_dir() -> Path:
    return paths.catalog_dir()


def load_images(root: Path | None = None) -> list[CatalogImage]:
    """Every image of the catalog, in the catalog's order (framework, then path)."""
    root = Path(root) if root else catalog_dir()
    if not root.is_dir():
        raise InputError(f"{root}: no image catalog here (run `cudabox images generate`)")
    out = []
    for path in sorted(root.glob("*/*/stack.json")):
        framework, tag = path.parent.parent.name, path.parent.name
        try:
            data = json.loads(read_input_text(path))  # bounded, like every file cudabox reads
            stack = Stack.from_dict(data)
        except (CudaboxError, ValueError, TypeError) as exc:
            raise InputError(f"{path}: not a catalog stack.json ({exc}); run `cudabox images generate`") from None
        out.append(CatalogImage(framework, tag, stack, data.get("stack_hash") or stack.hash))
    from ..knowledge.loader import load_frameworks

    order = {f: i for i, f in enumerate(load_frameworks().listing)}
    return sorted(out, key=lambda i: (order.get(i.framework, len(order)), i.path))


# --------------------------------------------------------------------------- --filter

_TERM = re.compile(r"^(?P<key>[a-z]+)\s*(?P<op>>=|<=|==|!=|=|>|<)\s*(?P<value>.+)$")
_KEYS = ("framework", "tag", "image", "cuda", "python", "flavour", "version", "cudnn")
_ORDERED = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}


def parse_filter(expr: str):
    """EXPR -> predicate. Terms separated by spaces or commas must all match (docs/ci.md):
    `KEY=GLOB`, `KEY!=GLOB`, `KEY>=VERSION` (also <=, >, <, ==), or a bare GLOB on framework/tag."""
    terms = [t for t in re.split(r"[\s,]+", expr.strip()) if t]
    if not terms:
        raise InputError("--filter: empty expression")
    checks = []
    for term in terms:
        m = _TERM.match(term)
        if not m:
            checks.append(_glob(term))
            continue
        key, op, value = m["key"], m["op"], m["value"]
        if key not in _KEYS:
            raise InputError(f"--filter {term!r}: unknown key {key!r} (known: {', '.join(_KEYS)})")
        if op in ("=", "!="):
            checks.append(lambda f, k=key, v=value, neg=op == "!=": fnmatch.fnmatchcase(f[k], v) != neg)
            continue
        try:
            wanted = Version(value)
        except InvalidVersion:
            raise InputError(f"--filter {term!r}: {value!r} is not a version") from None
        checks.append(lambda f, k=key, v=wanted, cmp=_ORDERED[op]: _version_cmp(f[k], v, cmp))
    return lambda image: all(check(image.fields()) for check in checks)


def _glob(pattern: str):
    if "/" in pattern:
        return lambda f: fnmatch.fnmatchcase(f["image"], pattern)
    return lambda f: any(fnmatch.fnmatchcase(f[k], pattern) for k in ("framework", "tag", "image"))


def _version_cmp(text: str, wanted: Version, cmp) -> bool:
    try:
        have = Version(text)
    except InvalidVersion:
        return False
    if cmp is operator.eq:  # cuda==12 means 12.x: compare as many parts as were given
        return have.release[:len(wanted.release)] == wanted.release
    return cmp(have, wanted)


def select(images: list[CatalogImage], filters: list[str] | None) -> list[CatalogImage]:
    """Images matching any of the filters (each filter: all of its terms)."""
    if not filters:
        return list(images)
    predicates = [parse_filter(f) for f in filters]
    return [i for i in images if any(p(i) for p in predicates)]


# --------------------------------------------------------------------------- matrix


def matrix(images: list[CatalogImage]) -> dict:
    """GitHub Actions `strategy.matrix`: one include entry per image."""
    return {"include": [{"id": i.id, "image": i.path, "framework": i.framework, "version": i.version,
                         "cuda": i.stack.cuda, "python": i.stack.python} for i in images]}


# --------------------------------------------------------------------------- bake


def stages(dockerfile: str) -> dict[str, str]:
    """Named stages of a Dockerfile -> their text (FROM line to the next FROM)."""
    out, name, lines = {}, None, []
    for line in dockerfile.splitlines():
        m = re.match(r"^FROM\s+\S+(?:\s+AS\s+(\S+))?\s*$", line, re.I)
        if m:
            if name:
                out[name] = "\n".join(lines).strip()
            name, lines = (m.group(1) or "").lower() or None, []
        if name:
            lines.append(line)
    if name:
        out[name] = "\n".join(lines).strip()
    return out


def shared_stages(root: Path, images: list[CatalogImage], target: str = "stack") -> dict[str, dict[str, str]]:
    """{image id: {stage name: shared target name}} for stages that several Dockerfiles hold verbatim
    and that use no other stage: bake builds each of them once and hands it to every image."""
    texts = {i.id: stages(read_input_text(root / i.path / "Dockerfile")) for i in images}
    seen: dict[tuple[str, str], list[str]] = {}
    for image_id, named in texts.items():
        for name, text in named.items():
            if name == target or re.search(r"--from=", text) or _uses_stage(text, named):
                continue
            digest = hashlib.sha256(text.encode()).hexdigest()[:12]
            seen.setdefault((name, digest), []).append(image_id)
    out: dict[str, dict[str, str]] = {}
    for (name, digest), users in seen.items():
        if len(users) > 1:
            for image_id in users:
                out.setdefault(image_id, {})[name] = f"stage-{name}-{digest}"
    return out


def _uses_stage(text: str, named: dict) -> bool:
    base = re.match(r"^FROM\s+(\S+)", text, re.I)
    return bool(base and base.group(1).lower() in named)


def bake(images: list[CatalogImage], root: Path | None = None, *, context: str = "images",
         ca_cert: str | None = None) -> dict:
    """docker-bake.json: a target per image (context images/, target `stack`), shared stages as contexts."""
    root = Path(root) if root else catalog_dir()
    shared = shared_stages(root, images)
    targets: dict[str, dict] = {}
    groups: dict[str, list[str]] = {"default": []}
    secret = [f"id=ca_cert,src={ca_cert}"] if ca_cert else []
    for image in images:
        for stage, name in sorted(shared.get(image.id, {}).items()):
            targets.setdefault(name, {"context": context, "dockerfile": f"{image.path}/Dockerfile",
                                      "target": stage, **({"secret": secret} if secret else {})})
    for image in images:
        target = {"context": context, "dockerfile": f"{image.path}/Dockerfile", "target": "stack",
                  "tags": [f"${{REGISTRY}}/{image.image}"], "platforms": ["linux/amd64"],
                  "labels": {"io.cudabox.stack.hash": image.stack_hash}}
        contexts = {stage: f"target:{name}" for stage, name in sorted(shared.get(image.id, {}).items())}
        if contexts:
            target["contexts"] = contexts
        if secret:
            target["secret"] = secret
        targets[image.id] = target
        groups["default"].append(image.id)
        groups.setdefault(image.framework, []).append(image.id)
    return {"variable": {"REGISTRY": {"default": "cudabox"}},
            "group": {name: {"targets": ids} for name, ids in groups.items()},
            "target": dict(sorted(targets.items(), key=lambda kv: (not kv[0].startswith("stage-"), kv[0])))}


# --------------------------------------------------------------------------- workflow


def workflow(images: list[CatalogImage], *, runner: tuple[str, ...] = DEFAULT_RUNNER) -> str:
    """.github/workflows/images.yml: generated-files check, then build + validate each image on a GPU runner."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.templates_dir())),
                             variable_start_string="[[", variable_end_string="]]",  # GitHub owns ${{ }}
                             block_start_string="[%", block_end_string="%]", comment_start_string="[#",
                             comment_end_string="#]", keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined, autoescape=False)
    for label in runner:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
            raise InputError(f"--runner: {label!r} is not a runner label")
    include = [json.dumps(e, separators=(", ", ": ")) for e in matrix(images)["include"]]
    return env.get_template(TEMPLATE).render(include=include, runner=json.dumps(list(runner)),
                                             count=len(images))


def current_runner(path: Path) -> tuple[str, ...]:
    """The build job's runner labels in an existing workflow (so a chosen --runner sticks); () if none."""
    import yaml

    try:
        runs_on = yaml.safe_load(read_input_text(Path(path)))["jobs"]["build"]["runs-on"]
    except (CudaboxError, yaml.YAMLError, KeyError, TypeError):
        return ()
    labels = [runs_on] if isinstance(runs_on, str) else runs_on
    ok = isinstance(labels, list) and all(isinstance(x, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", x) for x in labels)
    return tuple(labels) if ok else ()


def workflow_drift(path: Path, expected: str) -> list[str]:
    """How the committed workflow differs from what would be generated (empty: in sync)."""
    if not path.is_file():
        return [f"missing: {path}"]
    have = read_input_text(path)
    if have == expected:
        return []
    import difflib

    diff = list(difflib.unified_diff(have.splitlines(), expected.splitlines(), str(path), "generated", n=0,
                                     lineterm=""))
    return [f"modified: {path} ({sum(1 for d in diff if d[:1] in '+-' and d[:3] not in ('+++', '---'))} "
            "line(s) differ)"] + diff[2:22]
