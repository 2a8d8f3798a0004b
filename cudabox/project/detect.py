"""What a project needs, read from the files it already has (for `cudabox init`).

requirements.txt (with -r includes and index lines), pyproject.toml (PEP 621,
Poetry, uv), environment.yml (conda + its pip section) and setup.cfg. Each
file's requirements become PEP 508 strings the resolver understands; hints
about CUDA (a `/whl/cu121` index, `cuda-version=12.4`) and Python are kept with
where they came from, so init can explain its choices. What can't be carried
over (editable installs, git URLs, dev groups) becomes a note, never a silent
drop; a file that can't be parsed is an InputError naming file:line.
pyproject.toml is read by pyproject.py; both fill detected.Detected.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement

from ..errors import InputError, located
from ..files import Node, load_yaml
from ..knowledge.loader import load_frameworks
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
    if path.resolve() in seen:
        return True
    seen.add(path.resolve())
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
                    raise located(shown, number, f"-r {value}: file not found")
                plain &= read_requirements(path.parent / value, found, seen=seen)
            elif option in ("--extra-index-url", "--index-url", "-i"):
                found.add_index(value, where)
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
        if re.match(r"^(\.|/|[a-z+]+://)", line):
            found.notes.append(f"{where}: {line!r} is a path or URL, not a package name; not carried over")
            plain = False
            continue
        text = requirement(line, where)
        if Requirement(text).url:
            found.notes.append(f"{where}: {text!r} installs from a URL; not carried over (use `run:`)")
            plain = False
            continue
        plain &= found.add(text, where)
    return plain


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
    doc = load_yaml(path)
    if not isinstance(doc, Node):
        raise located(shown, getattr(doc, "line", 1), "expected a mapping with a `dependencies:` list")
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
                    else:
                        found.notes.append(f"{pip_at}: pip option {option} ignored")
                    continue
                found.add(requirement(str(text), pip_at), pip_at)
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
        found.add(requirement(f"{pip_name}{spec}", at), at)
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
            found.add(requirement(text, at), at)
    if parser.has_section("options.extras_require"):
        found.notes.append(f"{shown}: extras_require ({', '.join(parser.options('options.extras_require'))}) "
                           "not included")


# --------------------------------------------------------------------------- the project


def detect(directory: Path) -> Detected:
    """Read every dependency file the project has; later files add to earlier ones."""
    directory = Path(directory)
    found = Detected(root=directory, known=load_frameworks(directory))
    req = directory / "requirements.txt"
    if req.is_file() and read_requirements(req, found):
        from .spec import read_requirements_file

        try:  # cudabox.yaml can point at it only if spec.py reads it the same way
            read_requirements_file(req)
            found.requirements_file = "requirements.txt"
            found.in_requirements_file = set(found.requirements) | set(found.extra_index_urls)
        except InputError:
            pass
    if (directory / "pyproject.toml").is_file():
        from .pyproject import read_pyproject

        read_pyproject(directory / "pyproject.toml", found)
    for name in ("environment.yml", "environment.yaml"):
        if (directory / name).is_file():
            read_environment(directory / name, found)
            break
    if (directory / "setup.cfg").is_file():
        read_setup_cfg(directory / "setup.cfg", found)
    pv = directory / ".python-version"
    if pv.is_file():
        text = pv.read_text(encoding="utf-8").strip().splitlines()
        if text and re.fullmatch(r"3\.\d+(\.\d+)?", text[0].strip()):
            found.python, found.python_from = ".".join(text[0].strip().split(".")[:2]), ".python-version"
    return found
