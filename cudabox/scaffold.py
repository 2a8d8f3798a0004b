"""`cudabox init`'s file plan: a commented cudabox.yaml, cudabox.lock and a .dockerignore.

Everything is computed first (detection, host, resolution) and written only
when all of it succeeded, each file atomically: a failed or refused init
leaves the project exactly as it was. Existing files are never overwritten
without `force`; an existing .dockerignore is the project's own and is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from .detect import Detected
from .errors import InputError
from .files import display_path, write_atomic
from .lock import LOCK_FILE
from .spec import SPEC_FILE, _default_name

DOCKERIGNORE = ".dockerignore"

DOCKERIGNORE_TEXT = """\
# Written by `cudabox init`; yours to edit. What `cudabox build` leaves out of the build
# context (the project directory): history, local environments, caches and secrets.
# `cudabox run` mounts the live project at the workdir anyway; `cudabox build` adds its own rules.
.git
.venv
venv
.env
**/__pycache__
**/*.py[cod]
**/.pytest_cache
**/.mypy_cache
**/.ipynb_checkpoints
*.egg-info
"""


@dataclass
class Plan:
    """What init will write, and the facts behind it (for printing before asking)."""

    directory: Path
    detected: Detected
    files: dict[str, str]  # file name -> content, written in this order
    resolution: object  # project.Resolution
    kept: list[str] = field(default_factory=list)  # existing files left as they are
    assumed: list[str] = field(default_factory=list)  # what init assumed, one line each


def q(value) -> str:
    """A YAML scalar that reads back as the same string (JSON strings are YAML)."""
    return json.dumps(str(value))


def _comment_block(lines: list[str]) -> list[str]:
    return [f"# {line}".rstrip() for line in lines]


def spec_yaml(name: str, found: Detected, *, python: str | None, cuda: str | None, gpus: list[str],
              driver: str | None, host, python_from: str | None = None, cuda_from: str | None = None) -> str:
    """The commented cudabox.yaml: every key explained, each value with where it came from."""
    out = ["# cudabox.yaml: what this project needs. Written by `cudabox init`; edit freely.",
           "# `cudabox lock` turns it into cudabox.lock; `cudabox run` re-locks when this file changes.",
           "# Every key: docs/cudabox-yaml.md."]
    out.append(f"# Read: {', '.join(found.sources)}." if found.sources else
               "# No requirements.txt, pyproject.toml, environment.yml or setup.cfg was found.")
    out += ["", "# Project name; the image is cudabox/<name>:<lock hash>.", f"name: {q(name)}", ""]
    if python:
        out += ["# Python version or specifier.", f"# From {python_from}.", f"python: {q(python)}"]
    else:
        out += ["# Python version or specifier, e.g. \"3.11\". Unset: the newest Python every framework supports.",
                "# python: \"3.11\""]
    out += ["", "# Packages (PEP 508). torch/torchvision/torchaudio, tensorflow and jax are resolved against",
            "# cudabox's compatibility matrix (a +cu121 local version picks that CUDA build); the rest is",
            "# installed with pip as written."]
    inline = [r for r in found.requirements if r not in found.in_requirements_file]
    if found.requirements_file:
        out += [f"# {found.requirements_file} is read at every lock (-r includes and --extra-index-url lines too).",
                f"requirements_file: {q(found.requirements_file)}"]
    if inline:
        out.append("requirements:")
        width = max(len(q(r)) for r in inline)
        out += [f"  - {q(r).ljust(width)}  # {found.origins[r]}" for r in inline]
    elif not found.requirements_file:
        out += ["requirements: []"]
    extra = [u for u in found.extra_index_urls if u not in found.in_requirements_file]
    if extra:
        out += ["", "# Extra package indexes for the requirements (passed to the build as secrets).",
                "extra_index_urls:"] + [f"  - {q(u)}" for u in extra]
    out.append("")
    if cuda:
        out += ["# CUDA version. Remove it to let cudabox pick the newest the frameworks and driver allow.",
                f"# From {cuda_from}.", f"cuda: {q(cuda)}"]
    else:
        out += ["# CUDA version, e.g. \"12.4\" or \">=12.4\". Unset: the newest the frameworks and driver allow.",
                "# cuda: \"12.4\""]
    out += ["", "# GPUs the image must run on (names, nvidia-smi names, sm_89) and the oldest driver it must",
            "# run on. Set both and the lock is the same on every machine; unset, each lock uses the host's."]
    if gpus:
        out.append(f"gpus: [{', '.join(q(g) for g in gpus)}]")
    elif host.gpus:
        out.append(f"# gpus: [{', '.join(q(g.name) for g in host.gpus)}]  # this host's, used by the lock")
    else:
        out.append("# gpus: [\"A100\", \"RTX 4090\"]")
    if driver:
        out.append(f"driver: {q(driver)}")
    elif host.driver:
        out.append(f"# driver: {q(host.driver)}  # this host's, used by the lock")
    else:
        out.append("# driver: \"535.104.05\"")
    if not gpus and not driver and not host.driver and not host.gpus:
        why = "the host was ignored (--no-host)" if host.ignored else "no NVIDIA driver or GPU was found on this host"
        out += _comment_block([
            f"When `cudabox init` ran, {why}. Assumed: no GPU coverage check (the",
            "frameworks' own architecture lists) and no driver limit; the image requires a driver that runs",
            "its CUDA version, and `cudabox run` checks that before starting a GPU job."])
    out += ["", "# Image flavour: auto | slim (CUDA from wheels) | runtime | devel (nvcc, for compiling CUDA).",
            "# flavour: auto",
            "# apt packages for the project layer, e.g. [git, libgl1].",
            "# system_packages: []",
            "# Environment variables of the image (literal strings).",
            "# env: {HF_HOME: /cache/hf}",
            "# Extra build steps after the project files are copied, e.g. an editable install.",
            "# run: [\"pip install -e .\"]",
            "# Where the project lives in the container (`cudabox run` mounts it there).",
            "# workdir: /workspace",
            "# A CA bundle the build trusts (TLS-intercepting proxies); never stored in the image.",
            "# ca_cert: /etc/ssl/certs/ca-certificates.crt"]
    notes = found.notes
    if notes:
        out += ["", "# Notes from reading the project:"] + _comment_block([f"- {n}" for n in notes])
    return "\n".join(out) + "\n"


def plan_init(directory: Path, found: Detected, *, python: str | None = None, cuda: str | None = None,
              gpus: tuple[str, ...] = (), driver: str | None = None, no_host: bool = False,
              force: bool = False) -> Plan:
    """Detect, resolve and prepare the files; raises before anything is written."""
    from . import host as host_mod
    from .lock import make_lock
    from .project import resolve_project
    from .spec import load_spec

    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    for name in (SPEC_FILE, LOCK_FILE):
        if (directory / name).exists() and not force:
            raise InputError(f"{display_path(directory / name)} exists; pass --force to overwrite it "
                             "(or edit it and run `cudabox lock`)")
    _check_flags(python=python, cuda=cuda, driver=driver)
    host = host_mod.detect(ignore=no_host)
    python_from = "--python" if python else found.python_from
    cuda_from = "--cuda" if cuda else found.cuda_from
    text = spec_yaml(_default_name(directory), found, python=python or found.python, cuda=cuda or found.cuda,
                     gpus=list(gpus), driver=driver, host=host, python_from=python_from, cuda_from=cuda_from)
    try:  # validate what init would write, before writing anything
        spec = replace(load_spec(directory, text=text), source_file=SPEC_FILE)
    except InputError as exc:
        raise InputError(f"{exc} (in the cudabox.yaml init would write; check the detected values)") from None
    res = resolve_project(spec, no_host=no_host, host=host)
    lock = make_lock(spec, res.stack, list(res.others))
    files = {SPEC_FILE: text, LOCK_FILE: lock.to_json()}
    kept = []
    if (directory / DOCKERIGNORE).exists() and not force:
        kept.append(DOCKERIGNORE)
    else:
        files[DOCKERIGNORE] = DOCKERIGNORE_TEXT
    assumed = []
    if not gpus and not driver and not host.gpus and not host.driver:
        assumed.append(("host ignored (--no-host)" if host.ignored else "no NVIDIA driver or GPU on this host")
                       + f": the lock sets no driver limit; the image needs a driver that runs CUDA "
                       f"{res.stack.cuda} (>= {res.stack.min_driver or '?'}), checked by `cudabox run`")
    return Plan(directory=directory, detected=found, files=files, resolution=res, kept=kept, assumed=assumed)


def _check_flags(*, python, cuda, driver) -> None:
    from .model import DriverVersion
    from .spec import python_spec, version_spec

    if python:
        python_spec(python, what="--python")
    if cuda:
        version_spec(cuda, what="--cuda")
    if driver:
        try:
            DriverVersion.parse(driver)
        except ValueError as exc:
            raise InputError(f"--driver: {exc}") from None


def write_plan(plan: Plan) -> list[Path]:
    written = []
    for name, content in plan.files.items():
        path = plan.directory / name
        write_atomic(path, content)
        written.append(path)
    return written
