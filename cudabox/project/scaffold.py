"""What `cudabox init` writes besides the lock: a commented cudabox.yaml and a .dockerignore.

Every key of cudabox.yaml is explained, each detected value with where it
came from. lock/init.py plans the files (with the first lock) and writes them.
"""

from __future__ import annotations

import json
from .detected import Detected

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


def q(value) -> str:
    """A YAML scalar that reads back as the same string (JSON strings are YAML)."""
    return json.dumps(str(value))


def _comment_block(lines: list[str]) -> list[str]:
    return [f"# {part}".rstrip() for line in lines for part in str(line).splitlines() or [""]]


def spec_yaml(name: str, found: Detected, *, python: str | None, cuda: str | None, gpus: list[str],
              driver: str | None, host, python_from: str | None = None, cuda_from: str | None = None,
              problem: list[str] | None = None, refuse_eol_images: bool = False) -> str:
    """The commented cudabox.yaml: every key explained, each value with where it came from.

    `problem`: why init could not lock (exit 2/3): it goes at the top, with the ways out, so that
    the file the user is left with says what to change.
    """
    out = []
    if problem:
        out += _comment_block(["NOT LOCKED YET: `cudabox init` could not resolve what is below.", *problem,
                               "Edit this file, then run `cudabox lock` and delete this block (or `cudabox init --force` to start over)."])
        out.append("")
    out += ["# cudabox.yaml: what this project needs. Written by `cudabox init`; edit freely.",
            "# `cudabox lock` turns it into cudabox.lock; `cudabox run` re-locks when this file changes.",
            "# Every key: docs/cudabox-yaml.md; what init reads and what wins: docs/init.md."]
    out.append(f"# Read: {', '.join(found.sources)}." if found.sources else
               "# No dependency file was found (requirements*.txt, pyproject.toml, setup.py, environment.yml, ...):"
               "\n# add your packages under `requirements:` (or rerun `cudabox init --with torch`).")
    out += _comment_block([f"Not used: {u}" for u in found.unused])
    out += ["", "# Project name; the image is cudabox/<name>:<lock hash>.", f"name: {q(name)}", ""]
    if python:
        out += ["# Python version or specifier.", f"# From {python_from}.", f"python: {q(python)}"]
    else:
        out += ["# Python version or specifier, e.g. \"3.11\". Unset: the base image's own Python when every",
                "# framework supports it, else the newest they all support (installed by uv).",
                "# python: \"3.11\""]
    groups = ["/".join((fw.name, *fw.companions)) for fw in found.registry.items]
    names = " and ".join(filter(None, (", ".join(groups[:-1]), groups[-1]))) if groups else "Frameworks"
    tag = next((t for fw in found.registry.items if (t := fw.local_for("12.1"))), None)
    out += ["", f"# Packages (PEP 508). {names} are resolved against",
            "# cudabox's compatibility matrix" + (f" (a +{tag} local version picks that CUDA build)" if tag else "")
            + "; the rest is", "# installed with pip as written."]
    inline = [r for r in found.requirements if r not in found.in_references]
    if found.references:
        refs = found.references
        out += [f"# {', '.join(refs)}: read at every lock (a change there re-locks; `lock --check` names it).",
                f"requirements_file: {q(refs[0]) if len(refs) == 1 else '[' + ', '.join(map(q, refs)) + ']'}"]
    if inline:
        out.append("requirements:")
        width = max(len(q(r)) for r in inline)
        out += [f"  - {q(r).ljust(width)}  # {found.origins[r]}" for r in inline]
    elif not found.references:
        out += ["requirements: []"]
    extra = [u for u in found.extra_index_urls if u not in found.in_references]
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
    if found.cudnn:
        out += [f"# cuDNN major version. From {found.cudnn_from}.", f"cudnn: {q(found.cudnn)}"]
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
            "# apt packages for the project layer, e.g. [git, libgl1] (git is added for git+ requirements).",
            (f"system_packages: [{', '.join(map(q, found.system_packages))}]" if found.system_packages
             else "# system_packages: []"),
            "# Environment variables of the image (literal strings).",
            *([f"# From {', '.join(found.env_from[k] for k in found.env)}: it also picks the backend cudabox "
               "resolves.", "env: {" + ", ".join(f"{k}: {q(v)}" for k, v in found.env.items()) + "}"]
              if found.env else ["# env: {HF_HOME: /cache/hf}"]),
            "# Extra build steps after the project files are copied, e.g. an editable install.",
            *(["run:"] + [f"  - {q(c)}" for c in found.run] if found.run else ["# run: [\"pip install -e .\"]"]),
            "# Where the project lives in the container (`cudabox run` mounts it there).",
            "# workdir: /workspace",
            "# A CA bundle the build trusts (TLS-intercepting proxies); never stored in the image.",
            "# ca_cert: /etc/ssl/certs/ca-certificates.crt",
            "# End-of-life nvidia/cuda images are used with a warning; true refuses them (a strict shop).",
            "refuse_eol_images: true" if refuse_eol_images else "# refuse_eol_images: false"]
    notes = found.notes
    if notes:
        out += ["", "# Notes from reading the project:"] + _comment_block([f"- {n}" for n in notes])
    return "\n".join(out) + "\n"
