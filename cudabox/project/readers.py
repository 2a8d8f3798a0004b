"""More of what projects have, for `cudabox init`: setup.py, Pipfile, lock files, cog.yaml, a Dockerfile.

Each reader fills the same `Detected` as detect.py. Nothing is executed: setup.py is
read with `ast` (only literal values, or a requirements file it names); lock files are
TOML or JSON and only their exact pins of the frameworks are used. cog.yaml and a
Dockerfile FROM nvidia/cuda or pytorch/pytorch are translated into the closest
cudabox.yaml values, with a note for what has no counterpart.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from ..errors import located
from ..files import Node, load_yaml
from .detect import vcs_requirement
from .detected import Detected, read_text
from ..knowledge.values import python_spec
from .values import APT_PACKAGE

# --------------------------------------------------------------------------- setup.py


def read_setup_py(path: Path, found: Detected, read_file) -> bool:
    """setup(install_requires=..., python_requires=...) read statically; True when it named any requirement.

    `read_file(path)` reads a requirements file setup.py loads (the common `open("requirements.txt")`).
    """
    shown = found.show(path)
    raw = read_text(path, shown)
    try:
        tree = ast.parse(raw, filename=shown)
    except SyntaxError as exc:
        raise located(shown, exc.lineno, f"invalid Python: {exc.msg}") from None
    lists = {t.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", None)) == "setup"), None)
    if call is None:
        found.skip(shown, "no setup(...) call")
        return False
    args = {k.arg: k.value for k in call.keywords if k.arg}
    if not {"install_requires", "python_requires"} & set(args):
        found.skip(shown, "its setup() names no install_requires or python_requires")
        return False
    found.sources.append(shown)
    python = _literal(args.get("python_requires"), lists)
    if isinstance(python, str):
        found.hint_python(python, f"{shown}:{args['python_requires'].lineno} python_requires")
    value = args.get("install_requires")
    reqs = _literal(value, lists)
    if isinstance(reqs, (list, tuple)) and all(isinstance(r, str) for r in reqs):
        for text in reqs:
            at = f"{shown}:{_line(raw, text, value.lineno)}"
            found.take(text, at, at)
    elif value is not None:
        named = [n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and n.value.endswith(".txt")] + [n.value for v in lists.values() for n in ast.walk(v)
                                                  if isinstance(n, ast.Constant) and str(n.value).endswith(".txt")]
        files = [path.parent / n for n in dict.fromkeys(named) if (path.parent / n).is_file()]
        if files:
            found.notes.append(f"{shown}:{value.lineno}: install_requires is computed; read the file it "
                               f"names, {found.show(files[0])}")
            read_file(files[0])
        else:
            found.notes.append(f"{shown}:{value.lineno}: install_requires is computed, not a list; not read "
                               "(setup.py is never run): add the packages with `--with`")
    extras = _literal(args.get("extras_require"), lists)
    if isinstance(extras, dict) and extras:
        found.notes.append(f"{shown}: extras_require ({', '.join(map(str, extras))}) not included; "
                           "add what the image needs with `--with`")
    return bool(reqs) or value is not None


def _literal(node, names: dict):
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def _line(raw: str, needle: str, default: int) -> int:
    for number, line in enumerate(raw.splitlines(), 1):
        if f'"{needle}"' in line or f"'{needle}'" in line:
            return number
    return default


# --------------------------------------------------------------------------- Pipfile and lock files


LOCK_FILE_BYTES = 32 << 20  # a big monorepo's uv.lock runs to megabytes; other inputs stop at files.MAX_INPUT_BYTES


def _toml(path: Path, shown: str, **limit) -> dict:
    from .pyproject import load_toml

    return load_toml(path, read_text(path, shown, **limit))


def read_pipfile(path: Path, found: Detected) -> None:
    """Pipfile: [packages] (not [dev-packages]), [[source]] indexes, [requires] python_version."""
    from .pyproject import direct_url, poetry_constraint

    shown = found.show(path)
    doc = _toml(path, shown)
    found.sources.append(shown)
    python = (doc.get("requires") or {}).get("python_version")
    if python:
        found.hint_python(str(python), f"{shown} [requires] python_version")
    for source in doc.get("source") or []:
        url = source.get("url") if isinstance(source, dict) else None
        if url and "pypi.org/simple" not in url:
            found.add_index(str(url), f"{shown} [[source]] {source.get('name', '')}".rstrip())
    for name, value in (doc.get("packages") or {}).items():
        at = f"{shown} [packages] {name}"
        table = value if isinstance(value, dict) else {"version": value}
        extras = f"[{','.join(table['extras'])}]" if table.get("extras") else ""
        if "git" in table or "file" in table:
            table = {**table, "url": table["file"]} if "file" in table else {**table, "rev": table.get("ref")}
            found.take(f"{name}{extras} @ {direct_url(table)}", at, at)
            continue
        if "path" in table:
            found.notes.append(f"{at}: a local path; not carried over (use `run:`)")
            continue
        version = str(table.get("version", "*"))
        spec = version if version == "*" or version[0] in "<>=!~" else poetry_constraint(version)
        found.take(f"{name}{extras}{'' if spec == '*' else spec}", at, at)
    if doc.get("dev-packages"):
        found.notes.append(f"{shown}: [dev-packages] not included (development dependencies)")


def read_lock_file(path: Path, found: Detected) -> None:
    """uv.lock, poetry.lock, pdm.lock (TOML [[package]]) or Pipfile.lock (JSON): exact versions."""
    shown = found.show(path)
    if path.name == "Pipfile.lock":
        try:
            doc = json.loads(read_text(path, shown, limit=LOCK_FILE_BYTES))
        except json.JSONDecodeError as exc:
            raise located(shown, exc.lineno, f"invalid JSON: {exc.msg}") from None
        packages = [(n, str(v.get("version", "")).lstrip("=")) for n, v in (doc.get("default") or {}).items()
                    if isinstance(v, dict)]
    else:
        doc = _toml(path, shown, limit=LOCK_FILE_BYTES)
        packages = [(str(p.get("name")), str(p.get("version", ""))) for p in doc.get("package") or []
                    if isinstance(p, dict)]
    found.sources.append(shown)
    for name, version in packages:
        if version and re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version):
            found.pin(name, version, shown)


# --------------------------------------------------------------------------- cog.yaml

_COG_NO_COUNTERPART = {
    "predict": "cog's predictor; run it with `cudabox run -- python ...`",
    "train": "cog's trainer; run it with `cudabox run -- python ...`",
    "image": "cog's image name; cudabox names images cudabox/<name>:<lock hash>",
    "concurrency": "cog's serving setting", "environment": "build-time environment: add it to `env:`",
}


def read_cog(path: Path, found: Detected, read_file) -> None:
    """cog.yaml -> the same project in cudabox.yaml terms; what has no counterpart is a note."""
    shown = found.show(path)
    doc = load_yaml(path, shown=shown)
    if not isinstance(doc, Node):
        raise located(shown, getattr(doc, "line", 1), "expected a mapping with a `build:` section")
    found.sources.append(shown)
    build = doc.get("build") or Node()
    if not isinstance(build, Node):
        raise located(shown, doc.line_of("build"), "build: expected a mapping")
    at = lambda key: f"{shown}:{build.line_of(key)}"  # noqa: E731
    if build.get("python_version") is not None:
        text = ".".join(str(build["python_version"]).split(".")[:2])  # cog takes "3.8.12": the minor is the stack's
        python_spec(text, what=f"{at('python_version')} python_version")
        found.hint_python(text, f"{at('python_version')} python_version")
    if build.get("cuda") is not None:
        found.hint_cuda(".".join(str(build["cuda"]).split(".")[:2]), f"{at('cuda')} cuda")
    if build.get("cudnn") is not None:
        found.hint_cudnn(str(build["cudnn"]).split(".")[0], f"{at('cudnn')} cudnn")
    if build.get("python_requirements"):
        file = path.parent / str(build["python_requirements"])
        if not file.is_file():
            raise located(shown, build.line_of("python_requirements"), f"{file.name}: file not found")
        read_file(file)
    packages = build.get("python_packages") or []
    for i, text in enumerate(packages):
        where = f"{shown}:{packages.line_of(i)}"
        found.take(vcs_requirement(str(text)) or str(text), where, where)
    for i, pkg in enumerate(build.get("system_packages") or []):
        if APT_PACKAGE.match(str(pkg)):
            found.system_packages.append(str(pkg))
        else:
            found.notes.append(f"{shown}:{build['system_packages'].line_of(i)}: {pkg!r} is not an apt package "
                               "name; left out of system_packages")
    for step in build.get("run") or []:
        command = step.get("command") if isinstance(step, Node) else step
        if isinstance(command, str):
            found.run.append(command)
        if isinstance(step, Node) and step.get("mounts"):
            found.notes.append(f"{shown}: run step mounts (secrets) have no counterpart; "
                               "pass secrets to `cudabox build` as documented in docs/build.md")
    if build.get("gpu") is False:
        found.notes.append(f"{at('gpu')}: gpu: false — cudabox builds CUDA images; the image runs on CPU too")
    for key, why in _COG_NO_COUNTERPART.items():
        if key in doc or key in build:
            found.notes.append(f"{shown}: {key}: no counterpart ({why})")


# --------------------------------------------------------------------------- Dockerfile

_NVIDIA = re.compile(r"nvidia/cuda:(\d+\.\d+)(?:\.\d+)?(?:-cudnn(\d+))?")
_PYTORCH = re.compile(r"pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)-cuda(\d+\.\d+)(?:-cudnn(\d+))?")


def read_dockerfile(path: Path, found: Detected) -> None:
    """The CUDA, cuDNN and torch that a `FROM nvidia/cuda:...` or `FROM pytorch/pytorch:...` names."""
    shown = found.show(path)
    raw = read_text(path, shown)
    args = {}  # ARG NAME=default before FROM: `FROM ${BASE_IMAGE}` (facebookresearch/sam2's backend.Dockerfile)
    for number, line in enumerate(raw.splitlines(), 1):
        arg = re.match(r"\s*ARG\s+(\w+)=[\"']?([^\s\"']+)", line, re.IGNORECASE)
        if arg:
            args[arg.group(1)] = arg.group(2)
        m = re.match(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", line, re.IGNORECASE)
        if not m:
            continue
        image = re.sub(r"\$\{?(\w+)\}?", lambda v: args.get(v.group(1), v.group(0)), m.group(1))
        image, where = image.removeprefix("docker.io/"), f"{shown}:{number}"
        torch, nvidia = _PYTORCH.match(image), _NVIDIA.match(image)
        if torch:
            found.sources.append(shown)
            found.hint_cuda(torch.group(2), f"{where} (FROM {image})")
            if torch.group(3):
                found.hint_cudnn(torch.group(3), f"{where} (FROM {image})")
            if "torch" not in found.frameworks:
                found.take(f"torch=={torch.group(1)}", where, f"{where} (FROM {image})")
        elif nvidia:
            found.sources.append(shown)
            found.hint_cuda(nvidia.group(1), f"{where} (FROM {image})")
            if nvidia.group(2):
                found.hint_cudnn(nvidia.group(2), f"{where} (FROM {image})")
        else:
            found.skip(shown, f"FROM {image} names no CUDA version")
            return
        found.notes.append(f"{shown}: only its FROM line was read (RUN steps are not translated)")
        return
    found.skip(shown, "no FROM line")
