"""A framework as matrices/frameworks.yaml declares it, and the syntax of its pip requirements.

Everything cudabox knows about a framework that is not a release lives in
that file: its name and place in the order, other pip and conda names,
companions, its extra, the local version tag of a CUDA build and which
variant PyPI serves. The code here only turns those templates into
requirements and back, so a new framework (of a known shape) is a data edit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ..errors import InputError, Unsatisfiable
from .model import Provenance

PLAIN = "cuda"  # plain CUDA stacks (no framework): listed after the frameworks, under this name
SHAPES = ("variants", "extra", "plugins")  # how a framework's releases file is written (frameworks.yaml)
_FIELDS = {"major": r"(?P<major>\d+)", "minor": r"(?P<minor>\d)", "cudnn": r"(?P<cudnn>\d+)"}


def template_regex(template: str) -> str:
    """"cu{major}{minor}" -> a regex with named groups for the CUDA (and cuDNN) digits."""
    parts = re.split(r"\{(\w+)\}", template)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.escape(part))
        elif part in _FIELDS:
            out.append(_FIELDS[part])
        else:
            raise ValueError(f"unknown field {{{part}}} in {template!r} (known: {', '.join(_FIELDS)})")
    return "".join(out)


@dataclass(frozen=True)
class Framework:
    name: str
    shape: str  # variants | extra | plugins
    prov: Provenance
    aliases: tuple[str, ...] = ()
    conda: tuple[str, ...] = ()
    companions: tuple[str, ...] = ()
    local_tag: str | None = None  # "cu{major}{minor}"
    extra: str | None = None  # "and-cuda", "cuda{major}"
    without_extra: str | None = None  # "system"
    pypi_default: str | None = None  # "cuda12"
    cpu_local_tag: str | None = None  # "cpu": torch==2.4.1+cpu is a CPU wheel
    cpu_extra: str | None = None  # "cpu": jax[cpu] asks for CPU wheels

    def cpu_only(self, req) -> bool:
        """A CPU build (`torch==X+cpu`, `jax[cpu]` without a CUDA extra): a plain package, no CUDA stack."""
        tags = {spec.version.partition("+")[2] for spec in req.specifier} - {""}
        if self.cpu_local_tag and tags and tags == {self.cpu_local_tag}:
            return True
        return bool(self.cpu_extra) and self.cpu_extra in req.extras and self.variant_of_extras(req.extras) is None

    @cached_property
    def _local(self):
        return re.compile(template_regex(self.local_tag) + "$") if self.local_tag else None

    @cached_property
    def _extra(self):
        return re.compile(template_regex(self.extra) + r".*$") if self.extra else None

    def local_for(self, cuda: str) -> str | None:
        """The local tag of the build for CUDA "12.1" ("cu121"), None when the tag needs more than CUDA."""
        if not self.local_tag or "{cudnn}" in self.local_tag:
            return None
        major, _, minor = cuda.partition(".")
        return self.local_tag.format(major=major, minor=minor)

    def cuda_of_local(self, tag: str) -> str | None:
        """"cu121" -> "12.1"; None when the tag is not this framework's or names no CUDA minor."""
        m = self._local.match(tag) if self._local else None
        if not m or "minor" not in m.groupdict():
            return None
        return f"{int(m['major'])}.{m['minor']}"

    def variant_of_local(self, tag: str) -> str:
        """The variant a local version tag picks: the tag itself (cu121), or the extra it stands for."""
        m = self._local.match(tag) if self._local else None
        if m and self.shape == "plugins" and self.extra:
            return self.extra.format(major=int(m["major"]))
        return tag

    def variant_of_extras(self, extras) -> str | None:
        """The variant the requirement's extras pick (jax[cuda12_pip] -> cuda12), None for none."""
        for extra in sorted(extras):
            m = self._extra.match(extra) if self._extra else None
            if m:
                return self.extra.format(**{k: int(v) for k, v in m.groupdict().items()})
        return None

    def requirement(self, version: str, variant: str | None, *, pypi_default: bool = True) -> str:
        """The pip requirement of one build: torch==2.7.1+cu128, tensorflow[and-cuda]==2.21.0, jax[cuda12]==0.6.0."""
        if self.shape == "variants":
            return f"{self.name}=={version}" if pypi_default or not variant else f"{self.name}=={version}+{variant}"
        if self.shape == "extra":
            return f"{self.name}[{variant}]=={version}" if variant == self.extra else f"{self.name}=={version}"
        return f"{self.name}[{variant}]=={version}" if variant else f"{self.name}=={version}"

    def tag_shows_variant(self, variant: str | None) -> bool:
        """Whether image tags name the variant (2.7.1-cu128, 0.6.0-cuda12; not 2.21.0-and-cuda)."""
        return bool(variant) and self.shape != "extra"


@dataclass
class Want:
    """What the requirements ask of one framework or companion."""

    name: str
    spec: SpecifierSet = field(default_factory=SpecifierSet)
    variant: str | None = None
    texts: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return " and ".join(self.texts) or self.name


@dataclass(frozen=True)
class Frameworks:
    """The declared frameworks, in order, with lookups by any name that means one."""

    items: tuple[Framework, ...] = ()
    by_name: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        for fw in self.items:
            for name in (fw.name, *fw.aliases):
                self.by_name[canonicalize_name(name)] = fw

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(fw.name for fw in self.items)

    @property
    def companions(self) -> dict[str, Framework]:
        """Companion name -> the framework it pairs with."""
        return {c: fw for fw in self.items for c in fw.companions}

    def get(self, name: str) -> Framework | None:
        return self.by_name.get(canonicalize_name(name))

    @property
    def listing(self) -> tuple[str, ...]:
        """The order of every listing (stack, catalog, images/README.md): frameworks, then plain CUDA."""
        return self.names + (PLAIN,)

    def order(self, name: str) -> int:
        names = self.names
        return names.index(name) if name in names else len(names)

    def conda_names(self) -> dict[str, str]:
        return {c: fw.name for fw in self.items for c in fw.conda}

    def pip_aliases(self) -> dict[str, str]:
        return {canonicalize_name(a): fw.name for fw in self.items for a in fw.aliases}

    def cuda_of_local(self, tag: str) -> str | None:
        return next((c for fw in self.items if (c := fw.cuda_of_local(tag))), None)

    def split(self, requirements, known_variants: dict | None = None) -> tuple[dict[str, Want], list[str]]:
        """Requirements -> (a Want per framework or companion the matrix knows, the rest as written).

        The one place requirements are split: frameworks and companions are the resolver's;
        everything else (CPU builds included) passes through to pip. A companion alone brings its
        framework, and its local tag picks the framework's variant: the tags of a framework and its
        companions must name one CUDA (exit 3), and a tag is never dropped. `known_variants`
        (framework -> the variants the matrix has builds of) turns an extra naming no known
        variant (jax[cuda21]) into bad input.
        """
        wants: dict[str, Want] = {}
        others: list[str] = []
        companions = self.companions
        tags: dict[str, tuple[str, str]] = {}  # name -> (variant from a local tag, the requirement)
        for text in requirements:
            req = Requirement(text)
            name = canonicalize_name(req.name)
            fw = self.get(name)
            if fw is not None:
                name = fw.name
            elif name not in companions:
                others.append(text)
                continue
            if fw is not None and fw.cpu_only(req):
                others.append(text)
                continue
            want = wants.setdefault(name, Want(name))
            want.texts.append(text)
            for spec in req.specifier:
                version, _, local = spec.version.partition("+")
                if local:
                    variant = fw.variant_of_local(local) if fw else local
                    if want.variant and want.variant != variant:
                        raise Unsatisfiable("no stack satisfies the request", [
                            f"{want.describe()} asks for two CUDA variants ({want.variant}, {variant}) of {name}"])
                    want.variant = variant
                    tags[name] = (variant, text)
                want.spec &= SpecifierSet(f"{spec.operator}{version}")
            variant = fw.variant_of_extras(req.extras) if fw else None
            if variant:
                known = (known_variants or {}).get(fw.name)
                if known is not None and variant not in known:
                    extra = next(e for e in sorted(req.extras) if fw._extra.match(e))
                    listed = ", ".join(f"{fw.name}[{k}]" for k in sorted(known))
                    cpu = f" (and {fw.name}[{fw.cpu_extra}])" if fw.cpu_extra else ""
                    raise InputError(f"{fw.name}[{extra}]: unknown extra; known CUDA extras: {listed}{cpu}")
                want.variant = variant
        for companion, fw in companions.items():
            if companion in wants and fw.name not in wants:
                wants[fw.name] = Want(fw.name)
        self._agree_on_tags(wants, tags)
        return wants, others

    def _agree_on_tags(self, wants: dict[str, Want], tags: dict[str, tuple[str, str]]) -> None:
        for fw in self.items:
            group = {n: t for n, t in tags.items() if n == fw.name or n in fw.companions}
            variants = {tag for tag, _ in group.values()}
            if len(variants) > 1:
                texts = [text for _, text in group.values()]
                raise Unsatisfiable("no stack satisfies the request", [
                    f"{' and '.join(texts)} name {len(variants)} CUDA variants ({', '.join(sorted(variants))}): one "
                    "environment can hold one CUDA; use the same local tag on all of them"])
            if variants and fw.name in wants and wants[fw.name].variant is None:
                wants[fw.name].variant = next(iter(variants))
