"""The resolver's input: a `Request` (requirements plus where the image must run), built from
cudabox.yaml and host facts, or from flags. What the requirements ask of each framework
(`Want`) is the matrix's to say: `Matrix.frameworks.split` (knowledge/frameworks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..knowledge.matrix import Matrix
from ..knowledge.model import GPU, DriverVersion
from ..project.spec import ProjectSpec


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
    refuse_eol_images: bool = False  # end-of-life nvidia/cuda tags are used (with a warning) unless set
    python_install: str = "auto"
    context: tuple[str, ...] = ()  # reasons that come from outside (host detection)
    env: tuple[tuple[str, str], ...] = ()  # cudabox.yaml env: (KERAS_BACKEND picks Keras 3's backend)


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
        refuse_eol_images=spec.refuse_eol_images,
        python_install=spec.python_install, env=tuple(spec.env), **extra)


def _unique(gpus):
    seen, out = set(), []
    for g in gpus:
        if g.name not in seen:
            seen.add(g.name)
            out.append(g)
    return tuple(out)
