"""Every package pinned and hashed: `uv pip compile` for the image's platform and Python.

The stack's closure (frameworks, companions, everything they pull in) is
resolved first and becomes part of the stack (its hash, its image); the
project's requirements are resolved next, constrained to the stack's pins,
and only what they add is the project's. Each package comes from one index:
framework wheels from the index the resolver chose (an explicit uv index
that serves only them), everything else from PyPI or the project's index;
uv's `first-index` strategy, never a best match across indexes. The result
lists each package's files for the platform with their sha256; the build
installs exactly those files (`--no-deps --require-hashes`, no resolution).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..errors import EnvironmentProblem, InputError, Unsatisfiable
from ..resolve.stack import Pin

PYPI = "https://pypi.org/simple"
DIRECT = "direct"  # Pin.index of a requirement that names its own URL (a file, or git)
COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a git commit id: SHA-1, or SHA-256 repositories
_UV_ENV_DROP = re.compile(r"^(UV_|PIP_|VIRTUAL_ENV$|CONDA_PREFIX$)")
_NETWORK = re.compile(r"Failed to fetch|error sending request|dns error|Connection refused|timed out", re.I)
_GIT_NETWORK = re.compile(r"unable to access|Could not resolve|Couldn't connect|timed out|Connection refused", re.I)


class CompileFailed(Exception):
    """uv could not resolve: `reasons` are its own lines (the package with no wheel is named there)."""

    def __init__(self, message: str, reasons: list[str]):
        super().__init__(message)
        self.reasons = reasons


def uv_binary(version: str) -> str:
    """The uv binary cudabox runs, which must be the version the images use (matrices/images.yaml)."""
    try:
        import uv  # the `uv` wheel from PyPI ships the binary

        path = uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        import shutil

        path = shutil.which("uv")
    if not path:
        raise EnvironmentProblem("uv is not installed; cudabox locks packages with it",
                                 hint=f"pip install uv=={version}")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout.split()
    found = out[1] if len(out) > 1 else "?"
    if found != version:
        raise EnvironmentProblem(f"uv {found} at {path}, but the images build with uv {version} "
                                 "(matrices/images.yaml tools): the lock and the build must use the same uv",
                                 hint=f"pip install uv=={version}")
    return path


def public_url(url: str) -> str:
    """A URL without user:password (the lock is committed and copied into the build context)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _toml(value) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _pyproject(requirements, sources: dict[str, str]) -> str:
    lines = ['[project]', 'name = "cudabox-lock"', 'version = "0"',
             "dependencies = [" + ", ".join(_toml(r) for r in requirements) + "]", ""]
    names = {}
    for url in dict.fromkeys(sources.values()):
        names[url] = f"pinned-{len(names) + 1}"
    if sources:
        lines.append("[tool.uv.sources]")
        lines += [f"{_toml(pkg)} = {{ index = {_toml(names[url])} }}" for pkg, url in sorted(sources.items())]
        lines.append("")
    for url, name in names.items():  # explicit: these indexes serve only the packages pinned to them
        lines += ["[[tool.uv.index]]", f"name = {_toml(name)}", f"url = {_toml(url)}", "explicit = true", ""]
    return "\n".join(lines)


def pylock_text(pins, requirements=()) -> str:
    """Pins as a PEP 751 pylock.toml (uv reads it back as preferences: unchanged inputs keep their pins;
    a git pin is kept while its requirement still asks for the same branch or tag)."""
    from packaging.utils import canonicalize_name

    requested = _requested_revisions(requirements)
    lines = ['lock-version = "1.0"', 'created-by = "cudabox"', ""]
    for p in pins:
        if p.index == DIRECT and not p.vcs:
            continue  # a file URL the requirement names: nothing to prefer
        lines += ["[[packages]]", f"name = {_toml(p.name)}", f"version = {_toml(p.version)}"]
        if p.vcs:  # the locked commit stays the preference until --upgrade moves it
            url, commit, subdirectory = split_vcs(p.vcs)
            extra = f", subdirectory = {_toml(subdirectory)}" if subdirectory else ""
            wanted = requested.get(canonicalize_name(p.name))
            extra += f", requested-revision = {_toml(wanted)}" if wanted else ""
            lines += [f'vcs = {{ type = "git", url = {_toml(url)}, commit-id = {_toml(commit)}{extra} }}', ""]
            continue
        wheels = [(u, h) for u, h in p.files if u.endswith(".whl")]
        sdists = [(u, h) for u, h in p.files if not u.endswith(".whl")]
        if sdists:
            u, h = sdists[0]
            lines.append(f"sdist = {{ url = {_toml(u)}, hashes = {{ sha256 = {_toml(h)} }} }}")
        if wheels:
            lines.append("wheels = [" + ", ".join(f"{{ url = {_toml(u)}, hashes = {{ sha256 = {_toml(h)} }} }}"
                                                  for u, h in wheels) + "]")
        lines.append("")
    return "\n".join(lines)


def _requested_revisions(requirements) -> dict[str, str]:
    """name -> the branch, tag or commit after '@' of each git requirement."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out = {}
    for text in requirements:
        req = Requirement(text)
        if req.url and req.url.startswith("git+"):
            path = urlsplit(req.url.removeprefix("git+")).path
            if "@" in path:
                out[canonicalize_name(req.name)] = path.rsplit("@", 1)[1]
    return out


def _load_toml(text: str) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def compile_pins(requirements, *, uv: str, python: str, platform: str, sources: dict[str, str] | None = None,
                 index_url: str | None = None, extra_index_urls=(), constraints=(), previous=(),
                 upgrade: bool = False, upgrade_packages=(), ca_cert: str | None = None) -> list[Pin]:
    """Resolve `requirements` for `python` on `platform` -> sorted pins. Raises CompileFailed."""
    sources = dict(sources or {})
    default = index_url or PYPI
    with tempfile.TemporaryDirectory(prefix="cudabox-lock-") as tmp:
        tmp = Path(tmp)
        (tmp / "pyproject.toml").write_text(_pyproject(requirements, sources))
        out = tmp / "pylock.toml"
        if previous:
            out.write_text(pylock_text(previous, requirements))
        cmd = [uv, "pip", "compile", "pyproject.toml", "--no-config", "--quiet", "--no-header", "--format",
               "pylock.toml", "-o", str(out), "--python-version", python, "--python-platform", platform,
               "--index-strategy", "first-index", "--default-index", default,
               # resolve for the target Python without one: no interpreter search, no download
               "--python", sys.executable, "--no-python-downloads"]
        for url in extra_index_urls:
            cmd += ["--index", url]
        if constraints:
            (tmp / "constraints.txt").write_text("".join(f"{p.name}=={p.version}\n" for p in constraints))
            cmd += ["--constraint", "constraints.txt"]
        if upgrade:
            cmd.append("--upgrade")
        for name in upgrade_packages:
            cmd += ["--upgrade-package", name]
        env = {k: v for k, v in os.environ.items() if not _UV_ENV_DROP.match(k)}
        if ca_cert:
            env["SSL_CERT_FILE"] = ca_cert
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            lines = [line.strip(" ╰─▶×│").strip() for line in proc.stderr.splitlines()]
            reasons = [line for line in lines if line and not line.startswith("hint:")]
            _git_failure(reasons)
            fetch = next((line for line in reasons if _NETWORK.search(line)), None)
            if fetch:  # not a resolution failure: no Python fallback would help
                raise EnvironmentProblem(
                    f"cannot reach a package index to lock the packages ({fetch.removeprefix('cause: ')})",
                    hint="check the network, proxy and CA bundle (CUDABOX_CA_CERT); or `cudabox lock --no-packages` "
                         "to lock the stack alone (no build until the packages are locked)")
            raise CompileFailed(f"uv could not resolve the packages for Python {python} on {platform}", reasons)
        data = _load_toml(out.read_text())
    extras = [public_url(u) for u in extra_index_urls]
    pins = []
    for pkg in data.get("packages", []):
        name = pkg["name"]
        if "vcs" in pkg:
            pins.append(_vcs_pin(pkg))
            continue
        files = [(w["url"], w["hashes"]["sha256"]) for w in pkg.get("wheels", [])]
        if "sdist" in pkg:
            files.append((pkg["sdist"]["url"], pkg["sdist"]["hashes"]["sha256"]))
        index = _index_of(name, files, sources, default, extras) if files else DIRECT
        archive = pkg.get("archive", {})
        if archive.get("url") and archive.get("hashes", {}).get("sha256"):  # `pkg @ https://.../x.whl`
            files.append((archive["url"], archive["hashes"]["sha256"]))
        if not files:
            raise CompileFailed(f"{name} {pkg.get('version')}: no file to install (a local path or a "
                                "source cudabox can't lock: use a git+https URL or an index)", [])
        pins.append(Pin(name=name, version=str(pkg.get("version", "")), index=index,
                        files=tuple((public_url(u), h) for u, h in files)))
    return sorted(pins, key=lambda p: p.name)


def _vcs_pin(pkg: dict) -> Pin:
    """A git requirement, pinned to the commit uv resolved (`main` today -> that commit, for good)."""
    vcs = pkg["vcs"]
    commit = str(vcs.get("commit-id", ""))
    if vcs.get("type") != "git" or not COMMIT.fullmatch(commit):
        raise CompileFailed(f"{pkg['name']}: a {vcs.get('type')} source without a commit id can't be locked", [])
    url = public_url(vcs["url"])
    ref = f"git+{url}@{commit}" + (f"#subdirectory={vcs['subdirectory']}" if vcs.get("subdirectory") else "")
    return Pin(name=pkg["name"], version=str(pkg.get("version", "")), index=DIRECT, files=(), vcs=ref)


def split_vcs(ref: str) -> tuple[str, str, str | None]:
    """`git+URL@COMMIT[#subdirectory=DIR]` -> (URL, COMMIT, DIR)."""
    ref, _, fragment = ref.partition("#subdirectory=")
    url, _, commit = ref.removeprefix("git+").rpartition("@")
    return url, commit, fragment or None


def _git_failure(reasons: list[str]) -> None:
    """A git requirement uv could not fetch: exit 5 when the host can't be reached, else exit 2 naming
    the requirement and git's own line (a branch, tag or commit the repository doesn't have)."""
    if not any("Git operation failed" in r for r in reasons):
        return
    which = next((r for r in reasons if r.startswith("error:")), reasons[0]).removeprefix("error: ")
    fatal = next((r.split("fatal:", 1)[1].strip() for r in reasons if "fatal:" in r), None)
    said = f"{which}: {fatal or 'git failed'}"
    if fatal and _GIT_NETWORK.search(fatal):
        raise EnvironmentProblem(f"cannot reach a git repository to lock the packages ({said})",
                                 hint="check the network, proxy and CA bundle (CUDABOX_CA_CERT)")
    raise InputError(f"{said}; check the repository URL and the branch, tag or commit after '@'")



def _index_of(name: str, files, sources: dict, default: str, extras: list[str]) -> str:
    if name in sources:
        return public_url(sources[name])
    host = urlsplit(files[0][0]).netloc.rsplit("@", 1)[-1]
    for url in extras:  # first-index: an extra index that has the package serves it
        if urlsplit(url).netloc == host or files[0][0].startswith(url.rsplit("/simple", 1)[0]):
            return url
    return public_url(default)


def requirements_lines(pins) -> list[str]:
    """What the build installs: one exact file per package, `name @ URL --hash=sha256:...` (pip and uv
    both read it; with --no-deps --require-hashes nothing is resolved and no index is asked)."""
    out = []
    for p in pins:
        if p.vcs:
            continue  # no file to hash: installed from vcs-requirements.txt (image/render.py vcs_txt)
        url, sha = next(((u, h) for u, h in p.files if u.endswith(".whl")), p.files[0])
        out.append(f"{p.name} @ {url} --hash=sha256:{sha}")
    return out


def why_not(exc: CompileFailed) -> str:
    """uv's own explanation in one line ("Because oldpin==1.0 has no wheels with a matching Python ABI tag...")."""
    causes = [r.split(":", 1)[1].strip() if r.startswith(("cause:", "error:")) else r for r in exc.reasons]
    because = [c for c in causes if c.startswith("Because")]
    return (because or causes or [str(exc)])[-1]


def unsatisfiable(python_tried: list[tuple[str, CompileFailed]]) -> Unsatisfiable:
    """Exit 3: the full resolution failed for every Python tried; uv's reason for each."""
    reasons = [f"Python {python}: {why_not(exc)}" for python, exc in python_tried]
    return Unsatisfiable("the packages can't all be installed: no Python tried has a wheel for each", reasons)
