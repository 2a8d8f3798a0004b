"""The resolver's input: a `Request` (requirements plus where the image must run) and what the
requirements ask of each framework (`Want`). Built from cudabox.yaml and host facts, or from flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ..errors import InputError
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


def split_requirements(requirements) -> tuple[dict[str, Want], list[str]]:
    """Frameworks and companions the matrix knows -> Wants; everything else passes through to pip."""
    from packaging.requirements import Requirement

    wants: dict[str, Want] = {}
    others: list[str] = []
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name == "jaxlib":
            name = "jax"
        if name not in FRAMEWORKS + COMPANIONS:
            others.append(text)
            continue
        want = wants.setdefault(name, Want(name))
        want.texts.append(text)
        for spec in req.specifier:
            version, _, local = spec.version.partition("+")
            if local:
                want.variant = local
            want.spec &= SpecifierSet(f"{spec.operator}{version}")
        if name == "jax":
            for extra in req.extras:
                if extra.startswith("cuda13"):
                    want.variant = "cuda13"
                elif extra.startswith("cuda12"):
                    want.variant = "cuda12"
        if name == "tensorflow" and "and-cuda" in req.extras:
            want.variant = "and-cuda"
    for companion in COMPANIONS:
        if companion in wants and "torch" not in wants:
            wants["torch"] = Want("torch")
    return wants, others



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
