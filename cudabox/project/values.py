"""Values shared by cudabox.yaml and the detectors: PEP 508 requirements (URLs included), key names.

Its own module so that detection (detected.py, pyproject.py) and spec.py can both use it
without importing each other.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import InputError

APT_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$")
URL = re.compile(r"^https?://[^\s'\"\\]+$")


# What other tools call cudabox.yaml's keys (cog.yaml, conda, Poetry): a did-you-mean, not a guess.
KEY_ALIASES = {"python_version": "python", "cuda_version": "cuda", "python_packages": "requirements",
               "dependencies": "requirements", "packages": "requirements", "python_requirements": "requirements_file",
               "apt": "system_packages", "apt_packages": "system_packages", "environment": "env"}
URL_SCHEMES = ("https://", "http://", "git+https://", "git+http://")


def parse_requirement(text: str, *, what: str, allow_url: bool = True, frameworks=None) -> str:
    """A PEP 508 requirement, normalised. Direct URLs (`pkg @ git+https://...`) are installed as written,
    over http(s) only and without credentials (the requirements are copied into the image).
    With `frameworks` (knowledge.frameworks.Frameworks), a misspelt framework name is an error."""
    try:
        req = Requirement(str(text).strip())
    except InvalidRequirement as exc:
        raise InputError(f"{what}: invalid requirement {text!r}: {exc}") from None
    meant = framework_typo(req.name, frameworks) if frameworks is not None else None
    if meant:
        raise InputError(f"{what}: {req.name!r} is not the PyPI name; did you mean {meant!r}?")
    if req.url:
        if not allow_url:
            raise InputError(f"{what}: {text!r}: direct URL requirements are not allowed here")
        if not req.url.startswith(URL_SCHEMES) or not URL.match(req.url.split("+", 1)[-1]):
            raise InputError(f"{what}: {text!r}: only http(s) and git+https URLs can be installed in the image "
                             "(local paths and ssh need the project's files or keys; use `run:`)")
        if "@" in req.url.split("://", 1)[1].split("/")[0]:
            raise InputError(f"{what}: {text!r}: the URL carries credentials, which would be stored in the image")
    return str(req)


def needs_git(requirements) -> bool:
    """True when a requirement installs from git (the image then needs the git package)."""
    return any((Requirement(r).url or "").startswith("git+") for r in requirements)


def framework_typo(name: str, frameworks) -> str | None:
    """The framework a name almost is: conda's name (`pytorch`, on PyPI a stub that fails) or one typo
    away (`troch`, `torchvison`: a letter missing, added, changed or two swapped). None for real names."""
    from packaging.utils import canonicalize_name

    name = canonicalize_name(name)
    known = [*frameworks.names, *frameworks.companions]
    if name in known or frameworks.get(name) is not None:
        return None
    conda = frameworks.conda_names().get(name)
    if conda:
        return conda
    return next((k for k in known if len(k) >= 5 and _one_edit(name, k)), None)


def _one_edit(a: str, b: str) -> bool:
    """True when a and b differ by exactly one insertion, deletion, substitution or adjacent swap."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if len(a) == len(b):
        return a[i + 1:] == b[i + 1:] or (a[i:i + 2] == b[i:i + 2][::-1] and a[i + 2:] == b[i + 2:])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return short[i:] == long_[i + 1:]
