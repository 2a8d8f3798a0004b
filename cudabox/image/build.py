"""Build a project's image (or a bare catalog stack) from its lock, tag it only on success, validate it.

Two images, two content-addressed tags: `cudabox/stack:<stack hash>` holds the
stack and is shared by every project that locks the same one (built once,
then reused while it exists); `cudabox/<name>:<lock hash>` adds the project.
The project build starts FROM the tagged stack image, so it never rebuilds
the stack, even when the build cache was pruned or another builder made it.
Images are built by ID and tagged afterwards: a failed build tags nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..engine import BuildError, BuildRequest, Engine, connect, context_files
from ..errors import CheckFailed, CudaboxError, EnvironmentProblem
from ..files import read_input, write_atomic
from ..lock.lockfile import Lock, check_lock, read_lock
from ..resolve.stack import Stack
from ..trust import CA_ENV, ca_bundle

STACK_REPO = "cudabox/stack"
SECRETS_PREFIX = "cudabox-secrets-"  # + pid: the private temp folder of a build's secret files
TAG_LEN = 16  # hex digits of a hash in a tag
SUPPORT_DIR = ".cudabox/build"  # in the build context: smoke.py, expect.json, requirements.txt, Dockerfiles
DOCKERFILE = f"{SUPPORT_DIR}/Dockerfile"  # every stage, standalone (what `cudabox dockerfile` prints)
PROJECT_DOCKERFILE = f"{SUPPORT_DIR}/project.Dockerfile"  # the project stages on the stack image
PROJECT_SUPPORT_FILES = ("requirements.txt", "vcs-requirements.txt")  # what the project build reads there
CONTEXT_LABEL = "io.cudabox.context"  # fingerprint of what the project build read: unchanged -> reuse
INDEX_ENV = {"pip_index_url": "CUDABOX_PIP_INDEX_URL", "pip_extra_index_url": "CUDABOX_PIP_EXTRA_INDEX_URL"}


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    image_id: str
    stack_tag: str
    reused: bool  # no build ran for the final image: it existed and nothing it was built from changed
    validation: object | None = None  # validate.Report
    stack_id: str = ""
    stack_reused: bool = False
    builder: str = ""
    steps: tuple = ()  # {"image", "name", "status", "seconds"} of every Dockerfile step that ran
    seconds: float = 0.0
    pushed: tuple = ()

    def to_dict(self) -> dict:
        return {"image": self.tag, "image_id": self.image_id, "reused": self.reused,
                "stack": {"image": self.stack_tag, "image_id": self.stack_id, "reused": self.stack_reused},
                "builder": self.builder, "seconds": round(self.seconds, 2), "steps": list(self.steps),
                "pushed": list(self.pushed),
                "validation": self.validation.to_dict() if self.validation is not None else None}


class BuildFailed(CheckFailed):
    """A build failed: one line naming the step (and its exit code); its last output lines as reasons."""

    def __init__(self, message: str, reasons: list[str]):
        super().__init__(message)
        self.reasons = reasons


def repo_name(name: str) -> str:
    """A project name as a Docker repository path component (no leading/trailing/odd separators)."""
    text = re.sub(r"[._-]*[^a-z0-9._-]+[._-]*", "-", name.lower())
    text = re.sub(r"(?<=[a-z0-9])([._-]{2,})(?=[a-z0-9])", lambda m: "__" if m.group(1) == "__" else "-", text)
    return text.strip("._-") or "project"


def stack_tag(stack: Stack, suffix: str = "") -> str:
    return f"{STACK_REPO}:{stack.hash[:TAG_LEN]}{suffix}"


def folder_key(project_dir) -> str:
    """8 hex digits naming the project's folder: two checkouts with the same `name:` (or two folders that
    both fall back to the default name) never share a tag, so neither overwrites nor runs the other's code."""
    return hashlib.sha256(os.fsencode(str(Path(project_dir).resolve()))).hexdigest()[:8]


def project_tag(lock: Lock, suffix: str = "", *, project_dir) -> str:
    """`cudabox/<name>:<lock hash>-<folder key>`: content-addressed, and per project folder."""
    return f"cudabox/{repo_name(lock.project.name)}:{lock.hash[:TAG_LEN]}-{folder_key(project_dir)}{suffix}"


# --------------------------------------------------------------------------- public entry points


def ensure_image(project_dir=".", *, lock: Lock | None = None, plain: bool = False, no_cache: bool = False,
                 ca_cert=None, validate: bool = True, progress: bool = True, platform: str | None = None,
                 push: str | None = None, docker: str | None = None, engine: Engine | None = None) -> BuiltImage:
    """The project's image, built when missing or out of date, else reused; validated unless told not to.

    Without `lock`, cudabox.lock is read and must be current (else CheckFailed: run `cudabox lock`)."""
    started = time.monotonic()
    project_dir = Path(project_dir).resolve()
    if lock is None:
        check_lock(project_dir)
        lock = read_lock(project_dir)
    from ..lock.known import remember_project

    remember_project(Path(project_dir))
    engine = engine or connect(docker)
    suffix = _platform_suffix(engine, platform)
    steps: list[dict] = []
    with _secrets(engine, lock, resolve_ca_cert(project_dir, ca_cert)) as secrets:
        s_tag, s_id, s_reused = _ensure_stack(engine, lock.stack, secrets=secrets, no_cache=no_cache,
                                              platform=platform, suffix=suffix, plain=plain, progress=progress,
                                              steps=steps)
        rendered = _render(lock, engine)
        ignores = _write_project_files(project_dir, rendered, s_tag)
        # a builder that can't see the engine's images (buildx with a docker-container driver) builds the
        # full Dockerfile: its stack stage then comes from that builder's cache
        dockerfile = PROJECT_DOCKERFILE if engine.builder.local_images else DOCKERFILE
        ignore = ignores[dockerfile]
        tag = project_tag(lock, suffix, project_dir=project_dir)
        fingerprint = context_fingerprint(project_dir, ignore, dockerfile, s_id,
                                          read_input(project_dir / dockerfile).decode("utf-8"))
        existing = engine.image(tag)
        reused = bool(existing) and not no_cache and _labels(existing).get(CONTEXT_LABEL) == fingerprint
        if reused:
            image_id = existing["Id"]
        else:
            req = BuildRequest(project_dir, dockerfile, "project", ignore, secrets,
                               {CONTEXT_LABEL: fingerprint}, no_cache, platform)
            image_id = _run_build(engine, req, f"building {tag} on {s_tag}", plain, progress, steps, "project")
            _retag(engine, image_id, tag, existing)
    pushed = _push(engine, push, [(s_tag, s_id), (tag, image_id)], plain) if push else ()
    # an image for another platform can't run here (no emulation assumed): validate it where it runs
    report = _validation(engine, tag, image_id, reused) if validate and not suffix else None
    return BuiltImage(tag=tag, image_id=image_id, stack_tag=s_tag, reused=reused, validation=report, stack_id=s_id,
                      stack_reused=s_reused, builder=engine.builder.describe(), steps=tuple(steps),
                      seconds=time.monotonic() - started, pushed=tuple(pushed))


def build_stack(stack: Stack, *, plain: bool = False, no_cache: bool = False, ca_cert=None,
                validate: bool = True, progress: bool = True, platform: str | None = None,
                push: str | None = None, docker: str | None = None, engine: Engine | None = None) -> BuiltImage:
    """A bare stack (a catalog image): built in its own context under the user cache dir."""
    started = time.monotonic()
    engine = engine or connect(docker)
    steps: list[dict] = []
    suffix = _platform_suffix(engine, platform)
    with _secrets(engine, None, resolve_ca_cert(None, ca_cert)) as secrets:
        tag, image_id, reused = _ensure_stack(engine, stack, secrets=secrets, no_cache=no_cache,
                                              platform=platform, suffix=suffix, plain=plain, progress=progress,
                                              steps=steps)
    pushed = _push(engine, push, [(tag, image_id)], plain) if push else ()
    report = _validation(engine, tag, image_id, reused) if validate and not suffix else None
    return BuiltImage(tag=tag, image_id=image_id, stack_tag=tag, reused=reused, validation=report, stack_id=image_id,
                      stack_reused=reused, builder=engine.builder.describe(), steps=tuple(steps),
                      seconds=time.monotonic() - started, pushed=tuple(pushed))


# --------------------------------------------------------------------------- the two builds


def _ensure_stack(engine, stack, *, secrets, no_cache, platform, suffix, plain, progress, steps):
    tag = stack_tag(stack, suffix)
    existing = engine.image(tag)
    if existing and not no_cache and _labels(existing).get("io.cudabox.stack.hash") == stack.hash:
        return tag, existing["Id"], True
    context = paths.cache_dir() / "build" / f"stack-{stack.hash[:TAG_LEN]}"
    rendered = _render(stack, engine)
    files = dict(rendered.files, **{DOCKERFILE: rendered.dockerfile,
                                    DOCKERFILE + ".dockerignore": rendered.dockerignore})
    for rel, text in files.items():
        _write_if_changed(context / rel, text)
    req = BuildRequest(context, DOCKERFILE, "stack", _patterns(rendered.dockerignore), secrets, {}, no_cache, platform)
    image_id = _run_build(engine, req, f"building {tag} (stack {stack.hash[:12]})", plain, progress, steps, "stack")
    _retag(engine, image_id, tag, existing)
    return tag, image_id, False


def _labels(image: dict | None) -> dict:
    return ((image or {}).get("Config") or {}).get("Labels") or {}


def _render(lock_or_stack, engine):
    from .render import RenderOptions, render

    bk = engine.builder.buildkit
    return render(lock_or_stack, options=RenderOptions(buildkit=bk, secrets=bk, support_dir=SUPPORT_DIR))


def _run_build(engine, req: BuildRequest, title: str, plain: bool, progress: bool, steps: list, image: str) -> str:
    from ..engine.buildlog import BuildLog, Display  # here: `cudabox run` of a built image needs neither

    log = BuildLog()
    display = Display(f"{title} with {engine.builder.describe()}", plain=plain) if progress else None

    def on_event(event):
        log.add(event)
        if display:
            display.event(event)

    try:
        with display or contextlib.nullcontext():
            image_id = engine.build(req, on_event, display.line if display and plain else None)
    except BuildError as exc:
        line, tail = exc.log.failure()
        if re.search(r"load metadata for|pull access denied|failed to resolve|manifest unknown", " ".join(
                [line] + [t for _, t in exc.log.errors])):
            line += " (the base image is neither in the engine nor pullable: `docker pull` or `docker load` it)"
        raise BuildFailed(line, tail) from None
    finally:
        steps += [dict(s, image=image) for s in log.summary()]
    return image_id


def _retag(engine, image_id: str, tag: str, previous: dict | None) -> None:
    """Point `tag` at the new image; drop the image it replaced if nothing else uses it."""
    engine.tag(image_id, tag)
    if previous and previous["Id"] != image_id:
        engine.remove_image(previous["Id"])


def _platform_suffix(engine, platform: str | None) -> str:
    """Images for a non-native --platform get their own tags, so they never replace the native ones."""
    if not platform or platform == engine.native_platform():
        return ""
    return "-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", platform).strip("-")


def _push(engine, registry: str, images, plain: bool) -> list[str]:
    pushed = []
    for ref, image_id in images:
        remote = f"{registry.rstrip('/')}/{ref}"
        engine.tag(image_id, remote)
        sys.stderr.write(f"pushing {remote}\n")
        try:
            engine.push(remote, (lambda line: sys.stderr.write(f"  {line}\n")) if plain else None)
        except CheckFailed:
            engine.remove_image(remote)  # only the tag made for the push goes
            raise
        pushed.append(remote)
    return pushed


def _validation(engine, tag: str, image_id: str, reused: bool):
    from . import validate

    stored = validate.load_report(image_id) if reused else None
    return stored or validate.validate_image(tag, engine=engine)


# --------------------------------------------------------------------------- the build context


def project_dockerfile(dockerfile: str, stack_ref: str) -> str:
    """The rendered Dockerfile's project stages only, starting FROM the stack image instead of the stack
    stage. (The `uv` stage stays when a kept stage copies from it: the devel flavour's runtime stage.)"""
    header, stages = _stages(dockerfile)
    kept = [s for s in stages if s[0] not in ("stack", "uv")]
    if any("--from=uv" in text for _, text in kept):
        kept = [s for s in stages if s[0] == "uv"] + kept
    body = "".join(text for _, text in kept)
    body, n = re.subn(r"^FROM stack AS ", f"FROM {stack_ref} AS ", body, flags=re.M)
    if n != 1 or re.search(r"^FROM stack\b|--from=stack\b", body, re.M):
        raise RuntimeError("the rendered Dockerfile has no single `FROM stack AS ...` stage")  # template drift
    note = (f"# Generated by `cudabox build` from {Path(DOCKERFILE).name} (next to this file): its project stages, "
            f"on the stack image {stack_ref}. Do not edit.\n")
    return note + "".join(line for line in header.splitlines(keepends=True)[1:]) + body


def _stages(dockerfile: str) -> tuple[str, list[tuple[str, str]]]:
    """(text before the first stage, [(stage name, text)]); comments right above a FROM belong to its stage."""
    lines = dockerfile.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("FROM ")]
    bounds, previous = [], -1
    for i in starts:
        j = i
        while j - 1 > previous and lines[j - 1].startswith("#"):
            j -= 1
        bounds.append(j)
        previous = i
    header = "".join(lines[: bounds[0]]) if bounds else dockerfile
    stages = []
    for k, (start, at) in enumerate(zip(bounds, starts)):
        end = bounds[k + 1] if k + 1 < len(bounds) else len(lines)
        name = re.search(r"\bAS\s+(\S+)", lines[at], re.I)
        stages.append((name.group(1) if name else "", "".join(lines[start:end])))
    return header, stages


def _write_project_files(project_dir: Path, rendered, stack_ref: str) -> dict[str, list[str]]:
    """Write .cudabox/build/ (only files whose content changed: mtimes feed the reuse fingerprint);
    returns each Dockerfile's ignore patterns. The project's own .dockerignore is read, never written:
    BuildKit reads `<Dockerfile>.dockerignore` beside the Dockerfile instead of it, so its rules are merged
    in (cudabox's rules last: they keep .git, .env and the like out whatever the project says)."""
    own = project_dir / ".dockerignore"
    own_text = read_input(own).decode("utf-8", "replace") if own.is_file() else ""  # bounded, exit 2 if odd
    merged = ("# Written by `cudabox build`: the project's .dockerignore, then cudabox's rules. Do not edit.\n"
              + (own_text.rstrip("\n") + "\n" if own_text.strip() else "") + rendered.dockerignore)
    support = f"!{SUPPORT_DIR}"
    lines = merged.splitlines()
    # the project build reads only its requirements from .cudabox/build: the rest stays out of /workspace
    own_files = "\n".join(f"{support}/{name}" for name in PROJECT_SUPPORT_FILES)
    project_ignore = "\n".join(own_files if line.strip() == support else line for line in lines) + "\n"
    files = dict(rendered.files)
    files.update({DOCKERFILE: rendered.dockerfile, DOCKERFILE + ".dockerignore": merged,
                  PROJECT_DOCKERFILE: project_dockerfile(rendered.dockerfile, stack_ref),
                  PROJECT_DOCKERFILE + ".dockerignore": project_ignore})
    for rel, text in files.items():
        _write_if_changed(project_dir / rel, text)
    for stale_tools in (project_dir / SUPPORT_DIR).glob("tools-*.txt"):  # an earlier lock's installer pins
        if f"{SUPPORT_DIR}/{stale_tools.name}" not in files:
            stale_tools.unlink()
    for name in PROJECT_SUPPORT_FILES:  # a lock that no longer has such packages: not read, not copied
        stale = project_dir / SUPPORT_DIR / name
        if f"{SUPPORT_DIR}/{name}" not in files and stale.exists():
            stale.unlink()
    return {DOCKERFILE: _patterns(merged), PROJECT_DOCKERFILE: _patterns(project_ignore)}


def _write_if_changed(path: Path, text: str) -> None:
    try:  # bounded: whatever a checkout put there (a link to a device) is replaced, never read whole
        if path.is_file() and read_input(path) == text.encode("utf-8"):
            return
    except CudaboxError:
        pass
    write_atomic(path, text)


def _patterns(ignore_text: str) -> list[str]:
    return [line.strip() for line in ignore_text.splitlines() if line.strip() and not line.startswith("#")]


def context_fingerprint(context: Path, ignore: list[str], dockerfile: str, *extra: str) -> str:
    """What the project build reads: every file the ignore rules let through (path, mode, size, mtime),
    plus `extra` (stack image ID, Dockerfile). Unchanged -> the existing image is reused, no build runs."""
    digest = hashlib.sha256(json.dumps([dockerfile, *extra]).encode())
    for rel in sorted(context_files(context, list(ignore), dockerfile)):
        try:
            st = os.lstat(context / rel)
        except OSError:
            continue
        digest.update(f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


# --------------------------------------------------------------------------- network settings as secrets


def resolve_ca_cert(project_dir: Path | None, flag=None) -> tuple[Path, str] | None:
    """The CA bundle for builds (trust.ca_bundle's rule, with the project's `ca_cert:`)."""
    from ..project.spec import SPEC_FILE, load_spec

    if flag or os.environ.get(CA_ENV) or project_dir is None or not (project_dir / SPEC_FILE).exists():
        return ca_bundle(flag)
    spec = load_spec(project_dir)
    return ca_bundle(None, project_dir=project_dir, spec_value=spec.ca_cert, spec_where=f"{spec.source_file}: ca_cert")


def _sweep_secret_dirs() -> None:
    """Remove the secret folders of cudabox processes that died without cleaning up (kill -9): a signal
    cleans its own (the `with` below), and the next build cleans what a SIGKILL left."""
    import shutil

    for entry in Path(tempfile.gettempdir()).glob(f"{SECRETS_PREFIX}*-*"):
        pid = entry.name[len(SECRETS_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or int(pid) == os.getpid() or entry.is_symlink() or \
                    entry.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass


@contextlib.contextmanager
def _secrets(engine, lock: Lock | None, ca: tuple[Path, str] | None):
    """The build secrets (id -> file): the CA bundle, and the index URLs (cudabox.yaml's, or
    $CUDABOX_PIP_INDEX_URL / $CUDABOX_PIP_EXTRA_INDEX_URL) in private temporary files."""
    values = {"pip_index_url": lock.project.index_url if lock else None,
              "pip_extra_index_url": " ".join(lock.project.extra_index_urls) if lock else None}
    values = {k: os.environ.get(INDEX_ENV[k]) or v for k, v in values.items()}
    wanted = [ca[1]] if ca else []
    wanted += [f"{INDEX_ENV[k]} / cudabox.yaml index URLs" for k, v in values.items() if v][:1]
    if wanted and not engine.builder.buildkit:
        raise EnvironmentProblem(
            f"{' and '.join(wanted)} {'needs' if len(wanted) == 1 else 'need'} BuildKit build secrets, and there is "
            f"no BuildKit here ({engine.builder.why})",
            hint="install the docker buildx plugin, or point --docker / CUDABOX_DOCKER at a docker CLI with BuildKit")
    _sweep_secret_dirs()
    with tempfile.TemporaryDirectory(prefix=f"{SECRETS_PREFIX}{os.getpid()}-") as tmp:
        secrets = {"ca_cert": str(ca[0])} if ca else {}
        for ident, value in values.items():
            if value:
                path = Path(tmp) / ident
                path.touch(mode=0o600)
                path.write_text(value.strip() + "\n")
                secrets[ident] = str(path)
        yield secrets

