"""Render a locked stack into a Dockerfile, a .dockerignore and the build context's support files.

templates/Dockerfile.j2 draws the stages; this module decides the values and
makes each one safe for the place it lands: a shell word (`sh`), a Dockerfile
ENV/LABEL value (`dq`) or a JSON exec-form RUN (`json`). A value that can't be
made safe (a newline in an ENV value, an apt name with a space) is refused with
an InputError, whoever called: cudabox.yaml is validated at the door
(project/spec.py), but a lock file can be edited and a library caller can skip the
door. Same inputs, same bytes: nothing here reads the clock or the host.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


from .. import paths
from ..errors import InputError
from ..lock.lockfile import Lock
from ..project.spec import (APT_PACKAGE, CONTAINER_PATH, ENV_NAME, NAME, RESERVED_ENV, URL, needs_git,
                            parse_requirement, reserved_dir)
from ..resolve.stack import Stack
from ..knowledge.values import IMAGE_FLAVOURS

EXPECT_SCHEMA = "cudabox.expect/v1"
INSTALLERS = ("uv", "pip")
USER = "cudabox"
OPT = "/opt/cudabox"  # smoke test, expect.json, requirements.txt, uv-managed Python

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]*$")  # versions, variants, names in comments/labels
_CONTEXT_PATH = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._/-]*$")  # relative; ".." segments refused separately


@dataclass(frozen=True)
class RenderOptions:
    """How to render: builder features, installer, and where support files sit in the build context."""

    buildkit: bool = True  # False: the legacy builder (no --mount: no caches, no secrets)
    secrets: bool = True  # BuildKit build secrets (CA, index URLs); they need a client session (buildx/CLI)
    installer: str = "uv"  # uv | pip (pip: no uv unless the stack's Python comes from uv)
    support_dir: str = ".cudabox/build"  # smoke.py and requirements.txt, relative to the build context
    expect_path: str | None = None  # expect.json in the context; default: support_dir/expect.json
    pins_dir: str | None = None  # the stack's locked requirement files (catalog: per image); default: support_dir
    stack_only: bool = False  # only the stack stage (catalog images)
    uid: int = 1000  # the non-root user's uid (1000: the usual first user of a host, for bind mounts)
    title: str | None = None  # org.opencontainers.image.title
    version: str | None = None  # org.opencontainers.image.version (catalog tag)
    regenerate: str = "cudabox dockerfile -o .cudabox/build/Dockerfile"  # told in the header


@dataclass(frozen=True)
class Rendered:
    dockerfile: str
    dockerignore: str
    expect_json: str
    files: dict[str, str] = field(default_factory=dict)  # build-context path -> text to place there
    target: str = "project"  # the stage to build for the final image


def render(lock_or_stack: Lock | Stack, *, options: RenderOptions = RenderOptions()) -> Rendered:
    """Render a Lock (stack + project stages) or a bare Stack (stack stage only), from it alone: the uv
    version and the smoke thresholds are in the stack (no matrix is read after `lock`)."""
    lock = lock_or_stack if isinstance(lock_or_stack, Lock) else None
    stack = lock.stack if lock else lock_or_stack
    opts = _check_options(options)
    stack_only = opts.stack_only or lock is None
    support = opts.support_dir.rstrip("/")
    paths_in_context = {"smoke": f"{support}/smoke.py", "requirements": f"{support}/requirements.txt",
                        "vcs": f"{support}/vcs-requirements.txt",
                        "stack_lock": f"{opts.pins_dir or support}/stack-requirements.txt",
                        # named by content: the catalog's images share one file, so their uv stages are one
                        "tools_lock": f"{support}/{tools_file(stack)}",
                        "expect": opts.expect_path or f"{support}/expect.json"}
    if lock is not None and (stack.pins is None or lock.project.pins is None):
        raise InputError("cudabox.lock pins no packages (written with --no-packages, or by an older cudabox); "
                         "run `cudabox lock` to pin and hash them before building")
    smoke = smoke_source(stack)
    expect = expect_json(stack)
    values = _stack_values(stack, opts)
    values["uv_version"] = _match(_WORD, stack.tools.get("uv"), "uv version (the lock's stack.tools)")
    project = None if stack_only else _project_values(lock, stack, dict(values["stack_labels"]),
                                                      values["runtime_base"])
    env = _jinja()
    context = dict(values, opts=opts, ctx=paths_in_context, project=project, user=USER, opt=OPT,
                   stack_only=stack_only, locked=stack.pins is not None, stack_pins=bool(stack.pins),
                   tools_locked=bool(stack.tool_pins))
    dockerfile = env.get_template("Dockerfile.j2").render(**context)
    dockerignore = env.get_template("dockerignore.j2").render(support_dir=support)
    files = {paths_in_context["smoke"]: smoke, paths_in_context["expect"]: expect}
    how = None if lock is not None else f"regenerate with `{opts.regenerate}`"  # catalog images
    if stack.pins:
        if any(p.vcs for p in stack.pins):  # a stack is shared by projects: files with hashes only
            raise InputError("the stack's packages: a git package can't be part of a stack (only of a project)")
        files[paths_in_context["stack_lock"]] = locked_txt(stack.pins, "the stack's packages", how)
    if stack.tool_pins and values["uses_uv"]:
        files[paths_in_context["tools_lock"]] = locked_txt(stack.tool_pins, "the build tools", how)
    if project is not None and project["has_requirements"]:
        files[paths_in_context["requirements"]] = requirements_txt(lock, stack)
    if project is not None and project["has_vcs"]:
        files[paths_in_context["vcs"]] = vcs_txt(lock.project.pins)
    return Rendered(dockerfile=dockerfile, dockerignore=dockerignore, expect_json=expect, files=files,
                    target="stack" if stack_only else "project")


# --------------------------------------------------------------------------- support files


def expect_json(stack: Stack) -> str:
    """What the in-image smoke test checks (cudabox/image/smoke.py reads it), as sorted JSON."""
    thresholds = {k: stack.smoke[k] for k in ("gemm_pass", "bandwidth_pass") if k in stack.smoke}
    data = {
        "schema": EXPECT_SCHEMA, "stack_hash": stack.hash, "python": stack.python, "cuda": stack.cuda,
        "cudnn": stack.cudnn, "packages": dict(stack.packages), "frameworks": list(stack.framework_names),
        "min_driver": stack.min_driver,
        "targets": [{"gpu": t.gpu, "cc": t.cc, "peak_fp16_tflops": t.peak_fp16_tflops,
                     "peak_bandwidth_gbs": t.peak_bandwidth_gbs} for t in stack.targets],
        "thresholds": thresholds or None,
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def smoke_source(stack: Stack | None = None) -> str:
    """smoke.py's text; with a stack, only when it is the smoke test the stack was locked with (its hash
    is in the stack hash, so a changed smoke test never hides behind an existing stack image)."""
    data = paths.smoke_file().read_bytes()
    if stack is not None:
        import hashlib

        locked = stack.smoke.get("source_sha256")
        if not locked or not stack.tools.get("uv"):
            raise InputError("cudabox.lock predates the locked build tools and smoke test; run `cudabox lock`")
        if hashlib.sha256(data).hexdigest() != locked:
            raise InputError("the smoke test (cudabox/image/smoke.py) changed since cudabox.lock was written "
                             "(cudabox upgraded?); run `cudabox lock` to lock the new one")
    return data.decode("utf-8")


def locked_txt(pins, what: str, how: str | None = None) -> str:
    """Locked pins as pip requirements: one exact file per package with its sha256, installed with
    --no-deps --require-hashes (a changed file fails the build; nothing else is resolved or fetched)."""
    from ..lock.packages import requirements_lines

    how = how or "edit cudabox.yaml, then `cudabox lock`"
    lines = [f"# Generated by cudabox ({what}); do not edit: {how}.",
             "# Installed with --no-deps --require-hashes: exactly these files, nothing resolved."]
    for line in requirements_lines(sorted(pins, key=lambda p: p.name)):
        name, rest = line.split(" @ ", 1)
        url, sha = rest.split(" --hash=sha256:")
        _requirement(name, what)
        _url_or_file(url, what)
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise InputError(f"{what}: {name}: {sha!r} is not a sha256")
        lines.append(line)
    return "\n".join(lines) + "\n"


def tools_file(stack: Stack) -> str:
    """tools-<digest>.txt: the file name of the stack's locked build tools."""
    from ..resolve.stack import digest

    return f"tools-{digest([p.to_dict() for p in stack.tool_pins or ()])[:12]}.txt"


def vcs_txt(pins) -> str:
    """The project's git pins, each at the commit the lock resolved; installed with --no-deps after the
    hashed files (their dependencies are locked among those)."""
    from ..lock.packages import COMMIT, split_vcs

    what = "the project's git packages"
    lines = [f"# Generated by cudabox ({what}); do not edit: edit cudabox.yaml, then `cudabox lock`.",
             "# Installed with --no-deps: each at its locked commit (a git commit id names its content)."]
    for pin in sorted((p for p in pins if p.vcs), key=lambda p: p.name):
        _requirement(pin.name, what)
        url, commit, subdirectory = split_vcs(_text(pin.vcs, what))
        _url(url, what)
        if not COMMIT.fullmatch(commit):
            raise InputError(f"{what}: {pin.name}: {commit!r} is not a commit id")
        if subdirectory is not None and (not _CONTEXT_PATH.fullmatch(subdirectory) or ".." in subdirectory.split("/")):
            raise InputError(f"{what}: {pin.name}: subdirectory {subdirectory!r} is not a plain relative path")
        lines.append(f"{pin.name} @ {pin.vcs}")
    return "\n".join(lines) + "\n"


def requirements_txt(lock: Lock, stack: Stack) -> str:
    """The project's locked packages (what its requirements add to the stack's)."""
    return locked_txt(lock.project.pins or (), "the project's packages")


# --------------------------------------------------------------------------- values for the template


def _stack_values(stack: Stack, opts: RenderOptions) -> dict:
    if stack.flavour not in IMAGE_FLAVOURS:
        raise InputError(f"stack flavour {stack.flavour!r}: expected one of {', '.join(IMAGE_FLAVOURS)}")
    if stack.python_install not in ("os", "uv"):
        raise InputError(f"stack python_install {stack.python_install!r}: expected os or uv")
    base = _image(stack.base_image)
    runtime_base = None
    if stack.flavour == "slim" and base.startswith("nvidia/cuda"):
        raise InputError(f"slim stack with base {base}: slim images take CUDA from wheels, not nvidia/cuda")
    if stack.flavour == "devel":
        if base.count("-devel-") != 1:
            raise InputError(f"devel stack with base {base}: expected an nvidia/cuda ...-devel-... tag")
        runtime_base = base.replace("-devel-", "-runtime-")
    python = _match(_PYTHON, stack.python, "stack python")
    for word in (stack.cuda, *(x for f in stack.frameworks for x in (f.name, f.version, f.variant))):
        _match(_WORD, word, "stack field")
    picks = ", ".join(f"{f.name} {f.version} ({f.variant})" for f in stack.frameworks)
    summary = ", ".join(x for x in (picks, f"CUDA {stack.cuda}", f"Python {python}", stack.flavour) if x)
    uses_uv = opts.installer == "uv" or stack.python_install == "uv"
    labels = {"org.opencontainers.image.title": opts.title or f"cudabox stack {stack.hash[:12]}",
              "org.opencontainers.image.description": f"cudabox CUDA stack: {summary}",
              "org.opencontainers.image.base.name": base,
              "io.cudabox.stack": stack_label(stack), "io.cudabox.stack.hash": stack.hash,
              "io.cudabox.requirement": stack.requirement}
    if opts.version:
        labels["org.opencontainers.image.version"] = opts.version
    return dict(
        stack_hash=stack.hash, summary=summary, base=base, runtime_base=runtime_base, flavour=stack.flavour,
        python=python, python_install=stack.python_install, uses_uv=uses_uv,
        os_packages=["ca-certificates"] + (["python3"] if stack.python_install == "os" else [])
        + list(stack.os_packages)
        + (["python3-venv"] if stack.python_install == "os" and opts.installer == "pip" else []),
        requirements=[_requirement(r, "stack requirement") for r in stack.requirements],
        index_urls=[_url(u, "stack index URL") for u in stack.index_urls],
        requirement=_text(stack.requirement, "stack requirement (NVIDIA_REQUIRE_CUDA)"),
        stack_labels=sorted(labels.items()))


def _project_values(lock: Lock, stack: Stack, stack_labels: dict, runtime_base: str | None) -> dict:
    p = lock.project
    name = _match(NAME, p.name, "project name")
    for pkg in p.system_packages:
        _match(APT_PACKAGE, pkg, "system package")
    env = []
    for key, value in p.env:
        _match(ENV_NAME, key, "env name")
        if key in RESERVED_ENV:
            raise InputError(f"env: {key} is set by cudabox (it carries the stack); choose another name")
        env.append((key, _text(value, f"env {key}")))
    workdir = _match(CONTAINER_PATH, p.workdir, "workdir")
    if ".." in workdir.split("/") or reserved_dir(workdir):
        raise InputError(f"workdir {workdir!r}: choose a directory of its own (e.g. /workspace)")
    for i, cmd in enumerate(p.run, 1):
        if not isinstance(cmd, str) or "\x00" in cmd:
            raise InputError(f"run step {i}: commands must be text without NUL bytes")
    pins = lock.project.pins or ()
    hashed, git = [x for x in pins if not x.vcs], [x for x in pins if x.vcs]
    if pins:  # validates every line before anything is written
        requirements_txt(lock, stack)
        vcs_txt(pins)
    own = {"org.opencontainers.image.title": name, "io.cudabox.project": name, "io.cudabox.lock.hash": lock.hash}
    system = list(p.system_packages) + (["git"] if (git or needs_git(p.requirements)) and not any(
        s.split("=")[0] == "git" for s in p.system_packages) else [])  # the installer clones git pins
    return dict(name=name, system_packages=system, env=env, workdir=workdir.rstrip("/"),
                run=list(p.run), has_requirements=bool(hashed), has_vcs=bool(git), labels=sorted(own.items()),
                final_labels=runtime_base and sorted(  # devel: the runtime stage carries every label
                    {**stack_labels, **own, "org.opencontainers.image.base.name": runtime_base}.items()))


def stack_label(stack: Stack) -> str:
    """The stack's build fields as canonical JSON: sha256 of this label is io.cudabox.stack.hash."""
    return json.dumps(stack.build_dict(), sort_keys=True, separators=(",", ":"), default=str)


def _check_options(opts: RenderOptions) -> RenderOptions:
    if opts.installer not in INSTALLERS:
        raise InputError(f"installer {opts.installer!r}: expected one of {', '.join(INSTALLERS)}")
    for what, value in (("support_dir", opts.support_dir), ("expect_path", opts.expect_path),
                        ("pins_dir", opts.pins_dir)):
        if value is not None and (not _CONTEXT_PATH.fullmatch(value) or ".." in value.split("/")):
            raise InputError(f"{what} {value!r}: expected a plain path inside the build context")
    if not isinstance(opts.uid, int) or not 0 < opts.uid < 65534:
        raise InputError(f"uid {opts.uid!r}: expected a non-root uid")
    for what, value in (("title", opts.title), ("version", opts.version), ("regenerate", opts.regenerate)):
        if value is not None:
            _text(value, what)
    return opts


# --------------------------------------------------------------------------- validation and quoting


def _text(value, what: str) -> str:
    """A single-line value: control characters (a newline ends a Dockerfile instruction) are refused."""
    if not isinstance(value, str) or _CONTROL.search(value):
        raise InputError(f"{what}: {value!r} contains a newline or control character")
    return value


def _match(pattern: re.Pattern, value, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InputError(f"{what}: {value!r} is not allowed here")
    return value


def _image(ref) -> str:
    return _match(_IMAGE, ref, "base image")


def _requirement(text, what: str) -> str:
    return parse_requirement(_text(text, what), what=what)


def _url_or_file(url, what: str) -> str:
    """A locked file's URL: http(s) (no credentials) or file:// (local test indexes); one line, no quotes."""
    if isinstance(url, str) and url.startswith("file:///") and not re.search(r"[\s'\"\\]", url):
        return _text(url, what)
    return _url(url, what)


def _url(url, what: str) -> str:
    _match(URL, _text(url, what), what)
    if urlsplit(url).password is not None or "@" in urlsplit(url).netloc:
        raise InputError(f"{what}: {url!r} carries credentials, which would be stored in the image; "
                         "pass the index as the pip_index_url / pip_extra_index_url build secret instead")
    return url


def sh(value) -> str:
    """A shell word (shell-form RUN); one line only, or the next line would become an instruction."""
    return shlex.quote(_text(str(value), "shell word"))


def dq(value) -> str:
    """A double-quoted ENV/LABEL value: literal ($ does not expand), one line.

    A backslash is written outside the quotes: "a"\\\\"b" is a\\b to Docker, as "a\\\\b" would be,
    but hadolint's parser can't read an escaped backslash right before a quote.
    """
    text = _text(str(value), "ENV/LABEL value")
    return '"' + "".join(_DQ.get(ch, ch) for ch in text) + '"'


_DQ = {'"': '\\"', "$": "\\$", "\\": '"\\\\"'}


def exec_form(argv) -> str:
    """A JSON exec-form array: the whole command is one JSON string, so it can't start an instruction.

    An escaped backslash right before a quote (\\\\" or \\\\\\") is written \\u005c: the same to
    Docker's JSON parser, but hadolint's parser would read that quote wrongly.
    """
    tokens = re.findall(r'\\u[0-9a-fA-F]{4}|\\.|[^\\]', json.dumps(list(argv), ensure_ascii=True))
    return "".join("\\u005c" if tok == "\\\\" and nxt in ('"', '\\"') else tok
                   for tok, nxt in zip(tokens, tokens[1:] + [""]))


def _jinja():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.templates_dir())),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, autoescape=False)
    env.filters.update(sh=sh, dq=dq, exec_form=exec_form)
    return env
