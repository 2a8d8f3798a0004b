"""The values people give cudabox (cudabox.yaml, catalog.yaml, flags), checked in one place.

python, cuda and cudnn take a version or a specifier ("3.11", "12.1" = 12.1.x,
">=12.4"); a driver is a dotted version; a flavour is `auto` or one of the
image flavours. Errors name where the value came from (`what`: a flag, a key
or file:line) and exit 2; the callers add the file and line.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..errors import InputError
from .model import DriverVersion

IMAGE_FLAVOURS = ("slim", "runtime", "devel")  # what a stack is built on (templates/Dockerfile.j2)
FLAVOURS = ("auto", *IMAGE_FLAVOURS)  # what a project may ask for; auto lets the resolver choose


def version_spec(text: str, *, what: str) -> str:
    """User shorthand -> specifier: "12.1" means 12.1.x, "9" means 9.x; specifiers pass through."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)*", text):
        return f"=={text}.*" if text.count(".") < 2 else f"=={text}"
    if re.fullmatch(r"\d+(\.\d+)*\.\*", text):
        return f"=={text}"
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise InputError(f"{what}: {text!r} is not a version or specifier (e.g. 12.1, 12.*, >=12.4)") from None
    return text


def python_spec(text: str, *, what: str) -> str:
    text = str(text).strip()
    if re.fullmatch(r"3\.\d+", text):
        return f"=={text}.*"
    return version_spec(text, what=what)


def driver_version(text: str, *, what: str) -> str:
    """A driver version as written ("535.104.05"), checked."""
    try:
        DriverVersion.parse(text)
    except ValueError as exc:
        raise InputError(f"{what}: {exc}") from None
    return text


def flavour(text: str, *, what: str) -> str:
    if text not in FLAVOURS:
        raise InputError(f"{what}: {text!r}: expected one of {', '.join(FLAVOURS)}")
    return text


def flag_values(*, python: str | None = None, cuda: str | None = None, cudnn: str | None = None,
                driver: str | None = None, flavour_: str | None = None) -> dict:
    """The --python/--cuda/--cudnn/--driver/--flavour values given, checked; errors name the flag."""
    out = {}
    if python:
        out["python"] = python_spec(python, what="--python")
    if cuda:
        out["cuda"] = version_spec(cuda, what="--cuda")
    if cudnn:
        out["cudnn"] = version_spec(cudnn, what="--cudnn")
    if driver:
        out["driver"] = driver_version(driver, what="--driver")
    if flavour_ is not None:
        out["flavour"] = flavour(flavour_, what="--flavour")
    return out
