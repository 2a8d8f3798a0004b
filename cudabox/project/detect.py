"""The readers for requirements files, conda environments and setup.cfg (for `cudabox init`).

Each file's requirements become PEP 508 strings the resolver understands; hints
about CUDA (a `/whl/cu121` index, `cuda-version=12.4`) and Python are kept with
where they came from, so init can explain its choices. Git/URL requirements are
kept (`-e git+...#egg=x` becomes `x @ git+...`); what can't be carried over
(editable local installs, constraints files) becomes a note, never a silent drop;
a file that can't be parsed is an InputError naming file:line. The other readers
are in pyproject.py and readers.py; survey.py decides which files are read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import InputError, located
from ..files import Node, load_yaml, not_a_file, real_path
from .detected import Detected, line_of, read_text, requirement

# conda packages provided by the stack or the OS, not pip packages (frameworks' conda names are in
# matrices/frameworks.yaml)
CONDA_NAMES = {
    "pip": None, "cudnn": None, "nccl": None, "cuda-nvcc": None, "cuda-toolkit": None,
    "cuda-runtime": None, "cudatoolkit-dev": None, "mkl": None, "blas": None, "libblas": None,
    "setuptools": None, "wheel": None, "_libgcc_mutex": None, "libstdcxx-ng": None, "libgcc-ng": None,
    "openssl": None, "ca-certificates": None, "cpuonly": None,
}
_CONDA_CUDA = ("cuda-version", "cudatoolkit", "pytorch-cuda", "cuda")


def read_requirements(path: Path, found: Detected, *, seen: set | None = None) -> bool:
    """Read a requirements file into `found`; True when cudabox.yaml can reference it unchanged."""
    seen = seen if seen is not None else set()
    if real_path(path) in seen:
        return True
    seen.add(real_path(path))
    shown = found.show(path)
    raw = read_text(path, shown)
    found.sources.append(shown)
    plain, joined, number = True, "", 0
    for lineno, part in enumerate(raw.splitlines(), 1):
        number = number if joined else lineno  # a continued line is reported where it starts
        if part.endswith("\\"):
            joined += part[:-1] + " "
            continue
        line, joined = re.split(r"(^|\s)#", joined + part, maxsplit=1)[0].strip(), ""
        if not line:
            continue
        where = f"{shown}:{number}"
        if line.startswith("-"):
            option, value = (re.split(r"[\s=]+", line, maxsplit=1) + [""])[:2]
            value = value.strip()
            if option in ("-r", "--requirement"):
                if not (path.parent / value).is_file():
                    why = not_a_file(path.parent / value) if os.path.lexists(path.parent / value) else "file not found"
                    raise located(shown, number, f"-r {value}: {why}")
                plain &= read_requirements(path.parent / value, found, seen=seen)
            elif option in ("--extra-index-url", "--index-url", "-i"):
                found.add_index(value, where)
            elif option in ("-e", "--editable") and vcs_requirement(value):
                text = requirement(vcs_requirement(value), where)
                found.notes.append(f"{where}: -e {value}: installed as {text!r} (not editable in the image)")
                found.add(text, where)
                plain = False
            elif option in ("-e", "--editable"):
                found.notes.append(f"{where}: editable install {value!r} not carried over; add "
                                   f"`run: [\"pip install -e {value}\"]` to cudabox.yaml if the image needs it")
                plain = False
            elif option in ("-c", "--constraint"):
                found.notes.append(f"{where}: constraints file {value!r} not read (pins only what is required)")
                plain = False
            else:
                if option not in ("-f", "--find-links"):
                    plain = False
                found.notes.append(f"{where}: pip option {option} ignored")
            continue
        line = re.sub(r"\s--hash[ =]\S+", "", line).strip()
        if vcs_requirement(line):
            text = requirement(vcs_requirement(line), where)
            if not line.startswith(text.split(" @ ")[0] + "@") and "#egg=" not in line:
                found.notes.append(f"{where}: {line!r} names no package; installed as {text!r}")
            found.add(text, where)
            plain = False
            continue
        if re.match(r"^(\.|/|[a-z+]+://)", line):
            found.notes.append(f"{where}: {line!r} is a path or URL, not a package name; not carried over")
            plain = False
            continue
        plain &= found.take(line, where, where)
    return plain


def vcs_requirement(text: str) -> str | None:
    """`git+https://host/org/repo.git@v1#egg=name` (pip's form) -> "name @ git+https://...@v1"; else None.

    Without #egg= the name is the repository's (what pip would find in its metadata, most often).
    """
    m = re.fullmatch(r"((?:git\+)?https?://[^\s#]+)(?:#(\S*))?", text.strip())
    if not m or not (m.group(1).startswith("git+") or m.group(1).endswith((".git", ".zip", ".tar.gz", ".whl"))):
        return None
    url, fragment = m.group(1), m.group(2) or ""
    egg = re.search(r"(?:^|&)egg=([A-Za-z0-9._-]+)", fragment)
    name = egg.group(1) if egg else re.sub(r"(\.git|\.zip|\.tar\.gz)$", "",
                                           url.split("@")[0].rstrip("/").rsplit("/", 1)[-1])
    sub = re.search(r"(?:^|&)(subdirectory=[^&]+)", fragment)
    return f"{name} @ {url}" + (f"#{sub.group(1)}" if sub else "")


# --------------------------------------------------------------------------- environment.yml


def conda_requirement(text: str) -> tuple[str, str]:
    """A conda match spec -> (conda name, PEP 440 specifier): "numpy=1.26" -> ("numpy", "==1.26.*")."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", text.split("::")[-1].strip())
    if not m:
        raise ValueError(f"{text!r} is not a conda package spec")
    name, rest = m.group(1).lower(), m.group(2).strip()
    if not rest:
        return name, ""
    if rest[0] == "=" and rest[:2] != "==" or rest[0].isdigit():  # fuzzy: "=1.26", "=1.26.4=py311_0", "1.26.*"
        version = re.split(r"[=\s]", rest.lstrip("="))[0].rstrip("*").rstrip(".")
        if not re.fullmatch(r"\d+(\.\d+)*", version):
            raise ValueError(f"{text!r}: version {version!r} has no PEP 440 form")
        return name, f"=={version}.*" if version.count(".") < 2 else f"=={version}"
    spec = re.sub(r"(==[^=,\s]+)=\S+", r"\1", rest.split()[0])  # drop a build string
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        raise ValueError(f"{text!r}: {spec!r} has no PEP 440 form") from None
    return name, spec


def read_environment(path: Path, found: Detected) -> None:
    shown = found.show(path)
    doc = load_yaml(path, shown=shown)
    if not isinstance(doc, Node):
        raise located(shown, getattr(doc, "line", 1), "expected a mapping with a `dependencies:` list")
    if "dependencies" not in doc:
        found.skip(shown, "no `dependencies:` list (not a conda environment file)")
        return
    found.sources.append(shown)
    deps = doc.get("dependencies") or []
    if not isinstance(deps, list):
        raise located(shown, doc.line_of("dependencies"), "dependencies: expected a list")
    for i, item in enumerate(deps):
        at = f"{shown}:{deps.line_of(i)}"
        if isinstance(item, Node) and "pip" in item:
            pips = item["pip"] or []
            for j, text in enumerate(pips):
                pip_at = f"{shown}:{pips.line_of(j)}"
                if str(text).startswith("-"):
                    option, _, value = str(text).partition(" ")
                    if option in ("--extra-index-url", "--index-url", "-i"):
                        found.add_index(value.strip(), pip_at)
                    elif option in ("-e", "--editable") and vcs_requirement(value.strip()):
                        req = requirement(vcs_requirement(value.strip()), pip_at)
                        found.notes.append(f"{pip_at}: {text}: installed as {req!r} (not editable in the image)")
                        found.add(req, pip_at)
                    elif option in ("-e", "--editable"):
                        found.notes.append(f"{pip_at}: editable install {value.strip()!r} not carried over; add "
                                           f"`run: [\"pip install -e {value.strip()}\"]` if the image needs it")
                    else:
                        found.notes.append(f"{pip_at}: pip option {option} ignored")
                    continue
                text = vcs_requirement(str(text)) or str(text)
                found.take(text, pip_at, pip_at)
            continue
        if not isinstance(item, str):
            raise located(shown, deps.line_of(i), "dependencies: expected a package spec or a `pip:` list")
        try:
            name, spec = conda_requirement(item)
        except ValueError as exc:
            raise located(shown, deps.line_of(i), str(exc)) from None
        if name == "python":
            if spec:
                found.hint_python(spec.removeprefix("==").removesuffix(".*") if spec.startswith("==") else spec,
                                  f"{at} python")
            continue
        if name == "cudnn" and spec:
            found.hint_cudnn(re.sub(r"\D*(\d+).*", r"\1", spec), f"{at} ({item})")
            continue
        if name == "jaxlib" and re.search(r"=cuda(\d{2,3})", item):
            digits = re.search(r"=cuda(\d{2,3})", item).group(1)
            found.hint_cuda(digits[:2], f"{at} ({item}: a CUDA {digits[:2]} build)")
        if name in _CONDA_CUDA:
            version = re.match(r"\D*(\d+\.\d+)", spec or "")
            if version:
                found.hint_cuda(version.group(1), f"{at} ({item})")
            continue
        pip_name = {**CONDA_NAMES, **found.registry.conda_names()}.get(name, name)
        if pip_name is None:
            found.notes.append(f"{at}: conda package {name} comes with the stack or the OS; not a pip package")
            continue
        if pip_name != name:
            found.notes.append(f"{at}: conda's {name} is {pip_name} on PyPI")
        found.take(f"{pip_name}{spec}", at, at)
    if doc.get("channels"):
        found.notes.append(f"{shown}: conda channels ({', '.join(map(str, doc['channels']))}) don't apply: "
                           "cudabox installs wheels from PyPI and the frameworks' own indexes")


# --------------------------------------------------------------------------- setup.cfg


def read_setup_cfg(path: Path, found: Detected) -> None:
    import configparser

    shown = found.show(path)
    raw = read_text(path, shown)
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(raw, source=shown)
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None)
        raise located(shown, line, f"invalid setup.cfg: {exc.message.splitlines()[0]}") from None
    if not parser.has_section("options"):
        return
    found.sources.append(shown)
    if parser.has_option("options", "python_requires"):
        found.hint_python(parser.get("options", "python_requires").strip(),
                          f"{shown}:{line_of(raw, 'python_requires')} python_requires")
    for text in parser.get("options", "install_requires", fallback="").splitlines():
        text = text.split("#")[0].strip()
        if text:
            at = f"{shown}:{line_of(raw, text) or '?'}"
            found.take(text, at, at)
    if parser.has_section("options.extras_require"):
        found.notes.append(f"{shown}: extras_require ({', '.join(parser.options('options.extras_require'))}) "
                           "not included")


def read_backend_env(directory: Path, found: Detected) -> None:
    """The variables that pick a frontend's backend (frameworks.yaml frontends: KERAS_BACKEND), as the project
    sets them: `NAME=value` in .env, or os.environ["NAME"] = "value" / os.environ.setdefault("NAME", "value")
    in its top-level Python files. The first one found wins; a different value later is a note."""
    names = [r.backend_env for r in found.registry.frontends if r.backend_env]
    if not names:
        return
    pattern = "|".join(re.escape(n) for n in names)
    forms = [re.compile(rf"^\s*(?:export\s+)?(?P<name>{pattern})\s*=\s*[\"']?(?P<value>[\w.-]+)[\"']?\s*(?:#.*)?$"),
             re.compile(rf"os\.environ\[[\"'](?P<name>{pattern})[\"']\]\s*=\s*[\"'](?P<value>[\w.-]+)[\"']"),
             re.compile(rf"os\.environ\.setdefault\(\s*[\"'](?P<name>{pattern})[\"']\s*,\s*[\"'](?P<value>[\w.-]+)[\"']")]
    files = [directory / ".env"] if (directory / ".env").is_file() else []
    files += sorted(p for p in directory.glob("*.py") if p.is_file())
    for path in files:
        try:  # read bounded; one that can't be read (a device, huge, not UTF-8) has nothing to say here
            lines = read_text(path, found.show(path)).splitlines()
        except InputError:
            continue
        for number, line in enumerate(lines, 1):
            for form in forms[:1] if path.name == ".env" else forms[1:]:
                m = form.search(line)
                if not m:
                    continue
                where = f"{found.show(path)}:{number}"
                name, value = m["name"], m["value"]
                if name not in found.env:
                    found.env[name], found.env_from[name] = value, where
                elif found.env[name] != value:
                    found.notes.append(f"{where}: sets {name}={value}, but {found.env_from[name]} sets "
                                       f"{found.env[name]}; kept {found.env[name]}")
