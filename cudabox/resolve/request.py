"""The resolver's input: a `Request` (requirements plus where the image must run) and what the
requirements ask of each framework (`Want`). Built from cudabox.yaml and host facts, or from flags.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ..errors import InputError, Unsatisfiable
from ..knowledge.matrix import Matrix
from ..knowledge.model import GPU, DriverVersion
from ..project.spec import ProjectSpec, python_spec, version_spec

FRAMEWORKS = ("torch", "tensorflow", "jax")
COMPANIONS = ("torchvision", "torchaudio")


@dataclass(frozen=True)
class Request:
    """A resolution problem: requirements plus where the image must run."""

    requirements: tuple[str, ...] = ()
    python: str | None = None  # specifier
    gpus: tuple[GPU, ...] = ()
    driver: DriverVersion | None = None
    cuda: str | None = None  # specifier
    cudnn: str | None = None  # specifier
    flavour: str = "auto"
    allow_forward_compat: bool = False
    allow_eol_images: bool = False
    python_install: str = "auto"
    context: tuple[str, ...] = ()  # reasons that come from outside (host detection)


@dataclass
class Want:
    """What the requirements ask of one framework or companion."""

    name: str
    spec: SpecifierSet = field(default_factory=SpecifierSet)
    variant: str | None = None
    texts: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return " and ".join(self.texts) or self.name


def request_from_spec(spec: ProjectSpec, m: Matrix, *, driver: str | None = None,
                      host_gpus: tuple[GPU, ...] = (), **extra) -> Request:
    """Combine cudabox.yaml with host facts (explicit values in the spec win)."""
    if spec.gpus:
        resolved = tuple(m.gpu(g, where=f"{spec.source_file or '--gpu'}: gpus") for g in spec.gpus)
    else:
        resolved = tuple(host_gpus)
    drv = spec.driver or driver
    return Request(
        requirements=spec.requirements, python=spec.python, gpus=_unique(resolved),
        driver=DriverVersion.parse(drv) if drv else None, cuda=spec.cuda, cudnn=spec.cudnn,
        flavour=spec.flavour, allow_forward_compat=spec.allow_forward_compat,
        python_install=spec.python_install, **extra)


def _unique(gpus):
    seen, out = set(), []
    for g in gpus:
        if g.name not in seen:
            seen.add(g.name)
            out.append(g)
    return tuple(out)


# --------------------------------------------------------------------------- requirements -> wants


def split_requirements(requirements, known_extras: tuple[str, ...] | None = None) -> tuple[dict[str, Want], list[str]]:
    """Frameworks and companions the matrix knows -> Wants; everything else passes through to pip."""
    from packaging.requirements import Requirement

    wants: dict[str, Want] = {}
    others: list[str] = []
    tags: dict[str, tuple[str, str]] = {}  # name -> (CUDA local tag, the requirement that carries it)
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name == "jaxlib":
            name = "jax"
        if name not in FRAMEWORKS + COMPANIONS or _cpu_only(name, req):
            others.append(text)  # CPU packages stay CPU: a plain package, no GPU stack
            continue
        want = wants.setdefault(name, Want(name))
        want.texts.append(text)
        for spec in req.specifier:
            version, _, local = spec.version.partition("+")
            if local:
                local = _local_variant(name, local)
                if want.variant and want.variant != local:
                    raise Unsatisfiable("no stack satisfies the request", [
                        f"{want.describe()} asks for two CUDA variants ({want.variant}, {local}) of {name}"])
                want.variant = local
                tags[name] = (local, text)
            want.spec &= SpecifierSet(f"{spec.operator}{version}")
        if name == "jax":
            for extra in req.extras:
                variant = _jax_extra(extra, known_extras)
                if variant:
                    want.variant = variant
        if name == "tensorflow" and "and-cuda" in req.extras:
            want.variant = "and-cuda"
    for companion in COMPANIONS:
        if companion in wants and "torch" not in wants:
            wants["torch"] = Want("torch")
    _agree_on_tags(wants, tags)
    return wants, others


def _local_variant(name: str, local: str) -> str:
    """A local version tag -> the matrix's variant name: jaxlib's `cuda12.cudnn89` -> cuda12; torch's cu121 as is."""
    if name == "jax":
        m = re.fullmatch(r"(cuda\d+)(\.cudnn\d+)?", local)
        if m:
            return m.group(1)
    return local


def _cpu_only(name: str, req) -> bool:
    """`torch==X+cpu`, `jax[cpu]` (no CUDA extra): CPU wheels, which need no CUDA stack."""
    locals_ = {spec.version.partition("+")[2] for spec in req.specifier} - {""}
    if locals_ and all(tag == "cpu" for tag in locals_):
        return True
    return name == "jax" and "cpu" in req.extras and not any(e.startswith("cuda") for e in req.extras)


def _jax_extra(extra: str, known: tuple[str, ...] | None) -> str | None:
    """jax's `cudaNN` extras (also cudaNN_pip / cudaNN_local / cudaNN-local) -> the plugin variant.

    An extra that names a CUDA the matrix has no plugin for is bad input (exit 2) naming the known ones."""
    m = re.fullmatch(r"(cuda\d+)([_-](pip|local))?", extra)
    if not m:
        return None
    if known is not None and m.group(1) not in known:
        raise InputError(f"jax[{extra}]: unknown extra; known CUDA extras: "
                         f"{', '.join(f'jax[{k}]' for k in known)} (and jax[cpu])")
    return m.group(1)


def _agree_on_tags(wants: dict[str, Want], tags: dict[str, tuple[str, str]]) -> None:
    """torch, torchvision and torchaudio local tags (+cu121) must name one CUDA; a companion's tag
    alone selects torch's variant (a tag is never dropped)."""
    torch_tags = {name: tag for name, tag in tags.items() if name in ("torch",) + COMPANIONS}
    variants = {tag for tag, _ in torch_tags.values()}
    if len(variants) > 1:
        texts = [text for _, text in torch_tags.values()]
        raise Unsatisfiable("no stack satisfies the request", [
            f"{' and '.join(texts)} name {len(variants)} CUDA variants ({', '.join(sorted(variants))}): one "
            "environment can hold one CUDA; use the same +cuXYZ tag on all of them"])
    if variants and "torch" in wants and wants["torch"].variant is None:
        wants["torch"].variant = next(iter(variants))


def jax_extras(m: Matrix) -> tuple[str, ...]:
    """The jax[cudaNN] extras the matrix has plugins for."""
    return tuple(sorted({b.variant for b in m.builds_of("jax")}))


def parse_cli_values(*, python: str | None, cuda: str | None, cudnn: str | None, driver: str | None):
    """Validate flag values; errors name the flag."""
    out = {}
    if python:
        out["python"] = python_spec(python, what="--python")
    if cuda:
        out["cuda"] = version_spec(cuda, what="--cuda")
    if cudnn:
        out["cudnn"] = version_spec(cudnn, what="--cudnn")
    if driver:
        try:
            DriverVersion.parse(driver)
        except ValueError as exc:
            raise InputError(f"--driver: {exc}") from None
        out["driver"] = driver
    return out
