"""The project file, cudabox.yaml: read, validate (file:line errors), and type it.

Every value that will later reach a Dockerfile or a shell is validated here,
at the door: package names, environment variable names, paths.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, has_credentials, located
from ..files import Node, Seq, decode_input, display_path, load_yaml, read_input
from ..knowledge.loader import load_frameworks
from ..knowledge.values import driver_version, flavour as check_flavour, python_spec, version_spec
from .values import APT_PACKAGE, KEY_ALIASES, URL, needs_git, parse_requirement  # noqa: F401 - re-exported

PYTHON_INSTALLS = ("auto", "os", "uv")
SPEC_FILE = "cudabox.yaml"

# Use with .fullmatch: `$` in .match lets a trailing newline through, and a newline in a Dockerfile value
# starts a new instruction.
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONTAINER_PATH = re.compile(r"/[A-Za-z0-9._/-]*")
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters but tab
# A workdir here would hide the system, the venv, cudabox's own files or the job's cache mounts
# (jobs/run.py mounts caches under /cache; tests/test_spec_hardening.py keeps the two in step).
RESERVED_DIRS = ("/opt/venv", "/opt/cudabox", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/proc", "/sys",
                 "/dev", "/run", "/var", "/tmp", "/boot", "/root", "/cache")
# cudabox owns these: a project value would break the venv or defeat the driver check
RESERVED_ENV = ("PATH", "VIRTUAL_ENV", "NVIDIA_REQUIRE_CUDA")
MAX_REQUIREMENTS_BYTES = 1 << 20


@dataclass(frozen=True)
class ProjectSpec:
    """What a project asks for (cudabox.yaml), before resolution."""

    name: str
    directory: Path
    python: str | None = None  # specifier, e.g. "==3.11" or ">=3.10"
    requirements: tuple[str, ...] = ()  # PEP 508 strings, normalised
    gpus: tuple[str, ...] = ()
    driver: str | None = None
    cuda: str | None = None  # specifier over CUDA versions
    cudnn: str | None = None  # specifier over cuDNN versions
    flavour: str = "auto"
    system_packages: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    run: tuple[str, ...] = ()
    workdir: str = "/workspace"
    ca_cert: str | None = None
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    allow_forward_compat: bool = False
    refuse_eol_images: bool = False  # a strict shop: never an end-of-life nvidia/cuda tag
    python_install: str = "auto"
    source_file: str | None = None  # display path of cudabox.yaml
    inputs_hash: str = ""  # sha256 of cudabox.yaml (+ the files it references)
    inputs: tuple[tuple[str, str], ...] = ()  # (file, sha256) of each: `lock --check` names the one that changed


def inside(root: Path, path: Path, *, what: str, value: str, elsewhere: str = "") -> Path:
    """`path`, refused unless it stays inside the folder `root` once symlinks are followed.

    cudabox.yaml comes with a checkout: a path in it must not make cudabox read the user's other files
    (`requirements_file: ~/.ssh/id_rsa`, `ca_cert: ../../secrets`, `-r /dev/zero`)."""
    try:
        Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        raise InputError(f"{what}: {value!r} is outside the project folder; copy the file into the project"
                         + (f" {elsewhere}" if elsewhere else "")) from None
    except (OSError, RuntimeError):  # a symlink loop
        raise InputError(f"{what}: {value!r}: cannot follow the path (a symlink loop?)") from None
    return Path(path)


def reserved_dir(workdir: str) -> bool:
    workdir = "/" + workdir.strip("/")
    return workdir == "/" or any(workdir == d or workdir.startswith(d + "/") for d in RESERVED_DIRS)


def read_requirements_file(path: Path, *, seen: set | None = None, frameworks=None,
                           root: Path | None = None) -> tuple[list[str], list[str]]:
    """requirements.txt -> (requirements, extra index URLs). Follows -r includes (inside `root` only);
    every file is read bounded (a regular UTF-8 file of at most 1 MiB)."""
    seen = seen if seen is not None else set()
    path = Path(path)
    shown = display_path(path)
    try:
        key = path.resolve()
    except (OSError, RuntimeError):
        raise located(shown, None, "cannot follow the path (a symlink loop?)") from None
    if key in seen:
        return [], []
    seen.add(key)
    lines = decode_input(read_input(path, limit=MAX_REQUIREMENTS_BYTES, shown=shown), shown).splitlines()
    reqs, indexes = [], []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        option, _, value = line.partition(" ")
        value = value.strip()
        if option in ("-r", "--requirement"):
            if not value:
                raise located(shown, number, f"{option} needs a file name")
            include = path.parent / value
            if root is not None:
                try:
                    inside(root, include, what=option, value=value)
                except InputError as exc:
                    raise located(shown, number, str(exc)) from None
            more, idx = read_requirements_file(include, seen=seen, frameworks=frameworks, root=root)
            reqs += more
            indexes += idx
        elif option in ("--extra-index-url", "--index-url", "-i", "-f", "--find-links"):
            if option in ("--extra-index-url", "--index-url", "-i"):
                indexes.append(value)
        elif line.startswith("-"):
            raise located(shown, number, f"unsupported option {option!r}; "
                          "list packages by name (editable installs go in `run:`)")
        else:
            try:
                reqs.append(parse_requirement(line, what=f"{shown}:{number}", frameworks=frameworks))
            except InputError as exc:
                raise located(shown, number, str(exc).split(": ", 1)[-1]) from None
    return reqs, indexes


def read_reference(directory: Path, ref: str) -> tuple[list[str], list[str], list[tuple[str, bytes]]]:
    """A `requirements_file:` entry -> (requirements, index URLs, [(file, bytes) read]).

    A requirements file (with its -r includes), or pyproject.toml's dependencies, with optional
    groups in brackets: "pyproject.toml[gpu]". Read at every lock, so the lock follows the file.
    """
    m = re.fullmatch(r"([^\[\]]+?)\s*(?:\[([A-Za-z0-9_.,\s-]*)\])?", ref.strip())
    if not m:
        raise InputError(f"{ref!r}: expected a file name, optionally with [extras]")
    name, extras = m.group(1), [e.strip() for e in (m.group(2) or "").split(",") if e.strip()]
    path = inside(directory, directory / name, what="requirements_file", value=name)
    if not os.path.lexists(path):
        raise InputError(f"{name}: file not found")
    if path.name == "pyproject.toml":
        from .pyproject import pyproject_requirements

        data = read_input(path, shown=display_path(path))
        reqs, idx = pyproject_requirements(path, extras)
        return reqs, idx, [(name, data)]
    if extras:
        raise InputError(f"{ref!r}: [extras] apply to pyproject.toml only")
    seen: set = set()
    reqs, idx = read_requirements_file(path, seen=seen, frameworks=load_frameworks(directory), root=directory)
    files = sorted(seen, key=lambda p: (p != path.resolve(), str(p)))
    return reqs, idx, [(_relative(p, directory), read_input(p, limit=MAX_REQUIREMENTS_BYTES)) for p in files]


def _relative(path: Path, directory: Path) -> str:
    try:
        return str(Path(path).relative_to(Path(directory).resolve()))
    except ValueError:
        return str(path)


def _scalar(value) -> bool:
    """A YAML value that reads as text: a string or a number (dates too); never a bool, list, map or bytes."""
    import datetime

    return isinstance(value, (str, int, float, datetime.date)) and not isinstance(value, bool)


class _Reader:
    def __init__(self, node: Node, path: str):
        self.node, self.path = node, path

    def err(self, key, message):
        return located(self.path, self.node.line_of(key), f"{key}: {message}")

    def str(self, key, default=None):
        if key not in self.node or self.node[key] is None:
            return default
        value = self.node[key]
        if not _scalar(value):
            raise self.err(key, "expected a string")
        return str(value)

    def list(self, key):
        value = self.node.get(key)
        if value is None:
            return []
        if _scalar(value):  # one item may be written without the list
            one = Seq([value])
            one.line, one.item_lines = self.node.line_of(key), [self.node.line_of(key)]
            value = one
        if not isinstance(value, Seq):
            raise self.err(key, "expected a list")
        for i, item in enumerate(value):
            if not _scalar(item):
                raise located(self.path, value.line_of(i), f"{key}: item {i + 1}: expected a string")
        return [str(v) for v in value]

    def check(self, key, fn):
        try:
            return fn()
        except InputError as exc:
            raise located(self.path, self.node.line_of(key), str(exc)) from None


KEYS = ("name", "python", "requirements", "requirements_file", "gpus", "driver", "cuda", "cudnn", "flavour",
        "system_packages", "env", "run", "workdir", "ca_cert", "index_url", "extra_index_urls",
        "allow_forward_compat", "refuse_eol_images", "python_install")


def load_spec(directory: Path = Path("."), *, path: Path | None = None, text: str | None = None,
              has_with: bool = False) -> ProjectSpec:
    """Read and validate DIRECTORY/cudabox.yaml (or `text`, what `cudabox init` is about to write there).

    `has_with`: the calling command has --with, so its "not found" error may suggest it."""
    directory = Path(directory)
    path = Path(path) if path else directory / SPEC_FILE
    shown = display_path(path)
    if text is None and not os.path.lexists(path):
        raise InputError(f"{shown}: not found; run `cudabox init` to create it"
                         + (", or pass --with REQ" if has_with else ""))
    raw = read_input(path, shown=shown) if text is None else text.encode("utf-8")
    doc = load_yaml(path, decode_input(raw, shown))
    if doc is None:
        doc = Node()
        doc.line, doc.key_lines = 1, {}
    if not isinstance(doc, Node):
        raise located(shown, getattr(doc, "line", 1), "expected a mapping of keys (see docs/cudabox-yaml.md)")
    for key in doc:
        if key not in KEYS:
            import difflib

            close = [KEY_ALIASES[key]] if key in KEY_ALIASES else difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(KEYS)}"
            raise located(shown, doc.line_of(key), f"unknown key '{key}'{hint}")
    r = _Reader(doc, shown)
    digest = hashlib.sha256(raw)

    name = r.str("name") or default_name(directory)
    if not NAME.fullmatch(name):
        raise r.err("name", f"{name!r} is not a valid project name (lowercase letters, digits, '.', '_', '-')")
    frameworks = load_frameworks(directory)  # a misspelt framework (troch, pytorch) is a did-you-mean
    requirements = [r.check("requirements", lambda v=v: parse_requirement(v, what="requirement",
                                                                          frameworks=frameworks))
                    for v in r.list("requirements")]
    indexes, inputs = [], [(SPEC_FILE, hashlib.sha256(raw).hexdigest())]
    for req_file in r.list("requirements_file"):
        more, idx, files = r.check("requirements_file", lambda f=req_file: read_reference(directory, f))
        requirements += [x for x in more if x not in requirements]
        indexes += idx
        for name, data in files:
            digest.update(data)
            inputs.append((name, hashlib.sha256(data).hexdigest()))

    python = r.str("python")
    if python is not None:
        python = r.check("python", lambda: python_spec(python, what="python"))
    cuda = r.str("cuda")
    if cuda is not None:
        cuda = r.check("cuda", lambda: version_spec(cuda, what="cuda"))
    cudnn = r.str("cudnn")
    if cudnn is not None:
        cudnn = r.check("cudnn", lambda: version_spec(cudnn, what="cudnn"))
    driver = r.str("driver")
    if driver is not None:
        r.check("driver", lambda: driver_version(driver, what="driver"))
    flavour = r.str("flavour", "auto")
    r.check("flavour", lambda: check_flavour(flavour, what="flavour"))
    python_install = r.str("python_install", "auto")
    if python_install not in PYTHON_INSTALLS:
        raise r.err("python_install", f"{python_install!r}: expected one of {', '.join(PYTHON_INSTALLS)}")

    system_packages = r.list("system_packages")
    for pkg in system_packages:
        if not APT_PACKAGE.fullmatch(pkg):
            raise r.err("system_packages", f"{pkg!r} is not a Debian/Ubuntu package name")
    env = _read_env(doc, shown)
    run = r.list("run")
    for cmd in run:
        if "\x00" in cmd:
            raise r.err("run", "commands may not contain NUL bytes")
    workdir = r.str("workdir", "/workspace")
    if not CONTAINER_PATH.fullmatch(workdir) or ".." in workdir.split("/"):
        raise r.err("workdir", f"{workdir!r} must be an absolute container path of plain characters")
    if reserved_dir(workdir):
        raise r.err("workdir", f"{workdir!r} is a system, cudabox or cache folder in the container; "
                               "choose a folder of its own (e.g. /workspace)")
    ca_cert = r.str("ca_cert")
    if ca_cert is not None:
        r.check("ca_cert", lambda: inside(directory, directory / ca_cert, what="ca_cert", value=ca_cert,
                                          elsewhere="or pass a bundle elsewhere with --ca-cert / CUDABOX_CA_CERT"))
    index_url = r.str("index_url")
    extra = r.list("extra_index_urls") + indexes
    for key, url in [("index_url", index_url)] + [("extra_index_urls", u) for u in extra]:
        if url is not None and not URL.fullmatch(url):
            raise r.err(key, f"{url!r} is not an http(s) URL")
        if url is not None and ("@" in url.split("/")[2] or has_credentials(url)):  # user:password@, ?token=
            env = "CUDABOX_PIP_INDEX_URL" if key == "index_url" else "CUDABOX_PIP_EXTRA_INDEX_URL"
            raise r.err(key, f"the URL carries credentials, and the project files (this one included) are "
                             f"copied into the image; set {env} instead (it reaches the build as a secret)")
    forward = doc.get("allow_forward_compat", False)
    if not isinstance(forward, bool):
        raise r.err("allow_forward_compat", "expected true or false")
    refuse_eol = doc.get("refuse_eol_images", False)
    if not isinstance(refuse_eol, bool):
        raise r.err("refuse_eol_images", "expected true or false")
    gpus = r.list("gpus")

    return ProjectSpec(
        name=name, directory=directory.resolve(), python=python, requirements=tuple(requirements),
        gpus=tuple(gpus), driver=driver, cuda=cuda, cudnn=cudnn, flavour=flavour,
        system_packages=tuple(system_packages), env=tuple(env), run=tuple(run), workdir=workdir,
        ca_cert=ca_cert, index_url=index_url, extra_index_urls=tuple(dict.fromkeys(extra)),
        allow_forward_compat=forward, refuse_eol_images=refuse_eol, python_install=python_install,
        source_file=shown,
        inputs_hash=digest.hexdigest(), inputs=tuple(inputs),
    )


def _read_env(doc: Node, shown: str) -> list[tuple[str, str]]:
    env = doc.get("env")
    if env is None:
        return []
    if not isinstance(env, Node):
        raise located(shown, doc.line_of("env"), "env: expected a mapping of NAME: value")
    out = []
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
            raise located(shown, env.line_of(key), f"env: {key!r} is not a valid environment variable name")
        if key in RESERVED_ENV:
            raise located(shown, env.line_of(key), f"env: {key} is set by cudabox (it carries the stack); "
                                                   "choose another name")
        if not (_scalar(value) or isinstance(value, bool)):
            raise located(shown, env.line_of(key), f"env: {key}: expected a string value")
        value = str(value).lower() if isinstance(value, bool) else str(value)
        if CONTROL.search(value):
            raise located(shown, env.line_of(key), f"env: {key}: values may not contain newlines or "
                                                   "other control characters")
        out.append((key, value))
    return out


def default_name(directory: Path) -> str:
    """The project name when cudabox.yaml sets none: the folder's name, made valid (NAME)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", Path(directory).resolve().name.lower()).strip("-._")
    return name[:63].rstrip("-._") or "project"


def spec_from_flags(directory: Path, requirements: list[str], **values) -> ProjectSpec:
    """A ProjectSpec from command-line flags (`cudabox resolve --with ...`)."""
    frameworks = load_frameworks(directory)
    reqs = tuple(parse_requirement(r, what="--with", frameworks=frameworks) for r in requirements)
    return ProjectSpec(name=default_name(directory), directory=Path(directory).resolve(),
                       requirements=reqs, **{k: v for k, v in values.items() if v is not None})


__all__ = ["ProjectSpec", "load_spec", "spec_from_flags"]
