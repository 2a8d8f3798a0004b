"""Which of a project's files `cudabox init` reads, in what order, and which one wins (docs/init.md).

Order: requirements (requirements.txt, else one variant of requirements/*.txt or
requirements-*.txt), pyproject.toml, setup.py, setup.cfg, Pipfile, a conda environment,
cog.yaml, a Dockerfile; then lock files (their framework pins win over ranges) and
.python-version. Requirements add up; for Python, CUDA and cuDNN the first file that names
one wins and a disagreeing one is a note. Every dependency file found and not used is named,
with why. `--from FILE` reads that one file instead; `--with REQ` adds to either.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..files import not_a_file, printable, real_path
from .detect import read_backend_env, read_environment, read_requirements, read_setup_cfg
from .detected import Detected, read_text
from .values import parse_requirement

# A variant for development, tests or docs is never what the image needs.
_DEV = re.compile(r"(^|[-_./])(dev|develop|test|tests|testing|docs?|lint|style|typing|ci|bench|examples?|"
                  r"extras?|optional|build)([-_.]|$)")
_GPU = re.compile(r"(^|[-_./])(gpu|cuda|cu\d{2,3})([-_.]|$)")
_BASE = re.compile(r"(^|[-_./])(base|common|core|main|prod|runtime|default|requirements)([-_.]|$)")
LOCK_FILES = ("uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock")
CONDA_FILES = ("environment.yml", "environment.yaml", "conda.yaml", "conda.yml")
READABLE = ("requirements*.txt, requirements/*.txt, pyproject.toml, setup.py, setup.cfg, Pipfile, "
            "environment.yml, conda.yaml, cog.yaml, Dockerfile, uv.lock, poetry.lock, pdm.lock, Pipfile.lock")

Chooser = Callable[[list[str], str], str]  # (variants, the default) -> the one to use


def detect(directory: Path, *, from_file: Path | None = None, with_: tuple[str, ...] = (),
           extras: tuple[str, ...] = (), choose: Chooser | None = None, lenient: bool = False) -> Detected:
    """What the project needs, from its files (or `from_file` only), plus `with_`.

    `lenient`: a bad requirement line goes to `found.errors` and reading goes on (init then
    writes everything else it found); otherwise the first one is raised."""
    directory = Path(directory)
    found = Detected(root=directory, lenient=lenient)
    if from_file is not None:
        path = from_file if from_file.is_absolute() else Path.cwd() / from_file
        if not os.path.lexists(path):
            raise InputError(f"--from {from_file}: file not found")
        if not path.is_file():
            raise InputError(f"--from {from_file}: {not_a_file(path)}")
        read_one(path, found, extras)
        found.notes.append(f"--from {found.show(path)}: the project's other files were not read")
    else:
        _read_all(directory, found, extras, choose)
        read_backend_env(directory, found)  # KERAS_BACKEND: which framework a keras>=3 requirement brings
    for text in with_:
        found.add(parse_requirement(text, what="--with", frameworks=found.registry), "--with")  # a flag: at once
    return found


def read_one(path: Path, found: Detected, extras: tuple[str, ...] = ()) -> None:
    """Read one file by its kind (what `--from FILE` does)."""
    from .readers import read_cog, read_dockerfile, read_lock_file, read_pipfile, read_setup_py

    name = path.name
    if name == "pyproject.toml":
        _read_pyproject(path, found, extras)
    elif name in LOCK_FILES:
        read_lock_file(path, found)
        found.apply_pins()
    elif name == "setup.py":
        read_setup_py(path, found, lambda p: _read_reqs(p, found))
    elif name == "setup.cfg":
        read_setup_cfg(path, found)
    elif name == "Pipfile":
        read_pipfile(path, found)
    elif name in ("cog.yaml", "cog.yml"):
        read_cog(path, found, lambda p: _read_reqs(p, found))
    elif name == "Dockerfile" or name.endswith(".Dockerfile") or name.startswith("Dockerfile."):
        read_dockerfile(path, found)
    elif name.endswith((".yml", ".yaml")):
        read_environment(path, found)
    elif name.endswith((".txt", ".in")):
        _read_reqs(path, found)
    else:
        raise InputError(f"--from {found.show(path)}: not a file init reads ({READABLE})")


def _read_all(directory: Path, found: Detected, extras, choose: Chooser | None) -> None:
    from .readers import read_cog, read_dockerfile, read_lock_file, read_pipfile, read_setup_py

    def present(name: str) -> bool:
        return _present(directory / name, found)

    chosen = _requirements_file(directory, found, choose)
    if chosen:
        _read_reqs(chosen, found)
    if present("pyproject.toml"):
        _read_pyproject(directory / "pyproject.toml", found, extras)
    elif extras:
        raise InputError("--extra: the project has no pyproject.toml (extras are its optional dependencies)")
    if present("setup.py"):
        read_setup_py(directory / "setup.py", found, lambda p: _read_reqs(p, found))
    if present("setup.cfg"):
        read_setup_cfg(directory / "setup.cfg", found)
    if present("Pipfile"):
        read_pipfile(directory / "Pipfile", found)
    conda = [n for n in CONDA_FILES if present(n)]
    if conda:
        read_environment(directory / conda[0], found)
        for other in conda[1:]:
            found.skip(other, f"{conda[0]} was read (one conda environment per project)")
    for name in ("cog.yaml", "cog.yml"):
        if present(name):
            read_cog(directory / name, found, lambda p: _read_reqs(p, found))
    if present("Dockerfile"):
        read_dockerfile(directory / "Dockerfile", found)
    for other in sorted({*directory.glob("*.Dockerfile"), *directory.glob("Dockerfile.*")}):
        found.skip(other.name, f"a Dockerfile for one part of the project; `--from {other.name}` reads its FROM")
    locks = [n for n in LOCK_FILES if present(n)]
    for name in locks:
        read_lock_file(directory / name, found)
    if locks:
        found.apply_pins()
        for name in locks:  # a lock file that pinned nothing asked for is named as not used
            if not any(o.startswith(f"{name} (lock file") for o in found.origins.values()):
                found.sources.remove(name)
                found.skip(name, "pins no framework the project asks for (only framework pins are taken)")
    if present(".python-version"):
        text = read_text(directory / ".python-version", ".python-version").strip().splitlines()
        if text and re.fullmatch(r"3\.\d+(\.\d+)?", text[0].strip()):
            found.python, found.python_from = ".".join(text[0].strip().split(".")[:2]), ".python-version"


def _present(path: Path, found: Detected) -> bool:
    """A regular file init can read. A name that is there but is no such file (a directory, a device or
    pipe, a link to nothing or a loop) is named as not used, with why; init goes on with the others."""
    if path.is_file():
        return True
    if os.path.lexists(path):
        try:  # named as found in the project, not as where its link leads
            shown = printable(str(path.relative_to(found.root)))
        except ValueError:
            shown = found.show(path)
        found.skip(shown, not_a_file(path))
    return False


def _read_reqs(path: Path, found: Detected) -> None:
    """A requirements file; cudabox.yaml references it (read at every lock) when it reads the same there."""
    from .spec import read_reference

    before = set(found.requirements) | set(found.extra_index_urls)
    if real_path(path) in {real_path(found.root / s) for s in found.sources}:
        return
    plain = read_requirements(path, found)
    ref = found.show(path)
    if plain and not ref.startswith(("/", "..")):
        try:  # cudabox.yaml can point at it only if spec.py reads it the same way
            reqs, idx, _ = read_reference(found.root, ref)
        except InputError:
            return
        if set(reqs) | set(idx) <= set(found.requirements) | set(found.extra_index_urls):
            found.references.append(ref)
            found.in_references |= (set(reqs) | set(idx)) - before


def _read_pyproject(path: Path, found: Detected, extras) -> None:
    from .pyproject import pyproject_requirements, read_pyproject

    before = set(found.requirements) | set(found.extra_index_urls)
    if not read_pyproject(path, found, tuple(extras)):
        return
    reqs, idx = pyproject_requirements(path, list(extras))
    if reqs and set(reqs) | set(idx) <= set(found.requirements) | set(found.extra_index_urls):
        ref = found.show(path) + (f"[{','.join(extras)}]" if extras else "")
        found.references.append(ref)
        found.in_references |= (set(reqs) | set(idx)) - before


def _requirements_file(directory: Path, found: Detected, choose: Chooser | None) -> Path | None:
    """requirements.txt, else one variant: the GPU one by default (or the one the user picks)."""
    files = sorted(f for f in {*directory.glob("requirements*.txt"), *(directory / "requirements").glob("*.txt")}
                   if _present(f, found))
    if not files:
        return None
    shown = {found.show(f): f for f in files}
    for name in list(shown):
        if _DEV.search(name.removeprefix("requirements/").removeprefix("requirements")):
            found.skip(name, "development/test/docs requirements, not what the image needs")
            del shown[name]
    included = set()
    for path in shown.values():
        included |= _includes(path)
    candidates = [n for n, p in shown.items() if real_path(p) not in included]
    if not candidates:
        return None
    gpu = [n for n in candidates if _GPU.search(n)]
    if len(candidates) == 1:
        pick = candidates[0]
    elif "requirements.txt" in candidates and not gpu:
        pick = "requirements.txt"
    else:
        base = [n for n in candidates if _BASE.search(n.removeprefix("requirements/"))]
        default = (gpu or base or candidates)[0]
        pick = choose(candidates, default) if choose else default
        if pick not in candidates:
            raise InputError(f"{pick!r} is not one of {', '.join(candidates)}")
        how = "you chose it" if choose else ("the GPU variant" if gpu else "the base variant" if base else
                                             "the first")
        found.notes.append(f"requirements variants {', '.join(candidates)}: read {pick} ({how}); "
                           f"`cudabox init --from FILE` reads another")
    used = {real_path(shown[pick])} | _includes(shown[pick])
    for name, path in shown.items():
        if real_path(path) not in used:
            found.skip(name, f"another variant ({pick} was read; `--from {name}` reads this one)")
    return shown[pick]


def _includes(path: Path, seen: set | None = None) -> set:
    """The files a requirements file includes with -r, transitively."""
    seen = seen if seen is not None else set()
    try:  # bounded; one that can't be read is said so when it is read for real
        lines = read_text(path, str(path)).splitlines()
    except InputError:
        return seen
    for line in lines:
        m = re.match(r"\s*(?:-r|--requirement)[\s=]+(\S+)", line)
        if m:
            target = real_path(path.parent / m.group(1))
            if target not in seen and target.is_file():
                seen.add(target)
                _includes(target, seen)
    return seen
