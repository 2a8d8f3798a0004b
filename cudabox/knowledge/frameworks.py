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
    package: str | None = None  # the pip name when not `name` (paddlepaddle-gpu); a template names a
    #                             package per CUDA build (mxnet-cu{major}{minor})
    post_tag: str | None = None  # "post{major}{minor}": a CUDA build marked by a post-release (2.6.2.post120)
    variant_name: str | None = None  # "cu{major}{minor}": the variant a package name or post tag picks
    retired: str | None = None  # why the project no longer releases (said with every resolution)
    system_packages: tuple[str, ...] = ()  # apt packages its wheels load but don't ship (libgomp1)
    plugin_package: str | None = None  # "jax-cuda{major}-plugin": the PyPI project a CUDA extra installs
    python_from: str | None = None  # "jaxlib": the project whose wheel tags give a pure-Python framework's Pythons

    @property
    def pip_name(self) -> str:
        return self.package or self.name

    @cached_property
    def _package(self):
        return re.compile(template_regex(self.package) + "$") if self.package and "{" in self.package else None

    def variant_of_package(self, name: str) -> str | None:
        """mxnet-cu112 -> "cu112" (the variant a per-CUDA package name picks), None when not one of them."""
        m = self._package.match(canonicalize_name(name)) if self._package else None
        return self._variant_from(m) if m else None

    def variant_of_post(self, version: str) -> str | None:
        """"2.6.2.post120" -> "cu120" where post tags mark CUDA builds; None when not such a tag."""
        m = re.search(r"\.(post\d+)$", version)
        hit = re.fullmatch(template_regex(self.post_tag), m[1]) if m and self.post_tag else None
        return self._variant_from(hit) if hit else None

    def _variant_from(self, m) -> str:
        fields = m.groupdict()
        return (self.variant_name or "{major}.{minor}").format(**fields)

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

    def requirement(self, version: str, variant: str | None, *, pypi_default: bool = True,
                    post: str | None = None, package: str | None = None) -> str:
        """The pip requirement of one build: torch==2.7.1+cu128, tensorflow[and-cuda]==2.21.0, jax[cuda12]==0.6.0,
        paddlepaddle-gpu==2.6.2.post120 (`post`), mxnet-cu112==1.9.1 (`package`)."""
        if self.shape == "variants":
            name = package or self.pip_name
            if pypi_default or not variant or package:
                return f"{name}=={version}"
            if post:
                return f"{name}=={version}.{post}"
            # no local tag declared: the variant's own index alone picks the build (Paddle 3.x)
            return f"{name}=={version}+{variant}" if self.local_tag else f"{name}=={version}"
        if self.shape == "extra":
            return f"{self.name}[{variant}]=={version}" if variant == self.extra else f"{self.name}=={version}"
        return f"{self.name}[{variant}]=={version}" if variant else f"{self.name}=={version}"

    def selector(self, version: str, variant: str | None) -> str:
        """A requirement that picks exactly this build (the catalog's): torch==2.7.1+cu128, and for a
        framework whose builds pip tells apart by index or package name, the local tag cudabox reads the
        same way (paddlepaddle-gpu==3.0.0+cu126) or the package of that build (mxnet-cu112==1.9.1)."""
        if self.shape != "variants" or not variant:
            return self.requirement(version, variant, pypi_default=False)
        if self._package and self.variant_name:
            m = re.fullmatch(template_regex(self.variant_name), variant)
            if m:
                return f"{self.package.format(**m.groupdict())}=={version}"
        return f"{self.pip_name}=={version}+{variant}"

    def tag_shows_variant(self, variant: str | None) -> bool:
        """Whether image tags name the variant (2.7.1-cu128, 0.6.0-cuda12; not 2.21.0-and-cuda)."""
        return bool(variant) and self.shape != "extra"


_PROBES = [f"{major}.{minor}" for major in range(1, 6) for minor in range(0, 40)]


@dataclass(frozen=True)
class Frontend:
    """A package with no CUDA build of its own that runs on a framework: chosen by an environment
    variable from some release on (keras>=3: KERAS_BACKEND), fixed before it (Keras 2, tf-keras: TensorFlow)."""

    name: str
    prov: Provenance
    default: str  # the backend used when nothing names one (and the only one outside `choosable`)
    backends: tuple[tuple[str, str | None], ...] = ()  # value -> framework (None: runs without CUDA)
    backend_env: str | None = None  # KERAS_BACKEND
    choosable: SpecifierSet = field(default_factory=SpecifierSet)  # releases where backend_env applies
    fixed_spec: SpecifierSet = field(default_factory=SpecifierSet)  # the default's releases outside `choosable`
    same_minor: bool = False  # an exact pin X.Y.Z pairs with the default's X.Y.* (tf-keras 2.17.0: tensorflow 2.17)

    def pairing(self, req) -> SpecifierSet:
        """What a requirement on this frontend asks of its fixed backend's version (keras<3: tensorflow<2.16)."""
        spec = SpecifierSet(str(self.fixed_spec))
        if self.same_minor:
            pins = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
            for pin in pins:
                spec &= SpecifierSet("==" + ".".join(pin.split(".")[:2]) + ".*")
        return spec

    def _choosable(self, req) -> bool:
        """Whether the requirement allows a release whose backend can be chosen (keras>=3.5: yes, keras<3: no)."""
        if not self.backend_env:
            return False
        named = [s.version.rstrip(".*") for s in req.specifier]  # keras==3.15.1 allows 3.15.1 itself
        allowed = list(req.specifier.filter(_PROBES + named)) if named else _PROBES
        return any(v in self.choosable for v in allowed)

    def backend(self, req, env: dict, present: list[str], env_from: str) -> tuple[str | None, str, str]:
        """(framework or None, the backend value, why): the environment variable first, then the one
        backend framework the requirements already name, else the package's default."""
        mapping = dict(self.backends)
        if not self._choosable(req):
            return mapping.get(self.default), self.default, f"{self.name} releases it allows run on {self.default} only"
        if env.get(self.backend_env):
            value = env[self.backend_env]
            if value not in mapping:
                raise InputError(f"{env_from} {self.backend_env}={value}: {self.name} backends are {', '.join(mapping)}")
            return mapping[value], value, f"{self.backend_env}={value} from {env_from}"
        named = [v for v, fw in mapping.items() if fw in present]
        if len(named) == 1:
            return mapping[named[0]], named[0], \
                f"no {self.backend_env} set; the requirements name {mapping[named[0]]}, its only backend there"
        why = f"no {self.backend_env} set" + ("" if not named else f" and the requirements name {len(named)} backends")
        return mapping.get(self.default), self.default, \
            f"{why}: {self.name}'s default; set {self.backend_env} in cudabox.yaml env: to choose"


@dataclass
class Want:
    """What the requirements ask of one framework or companion."""

    name: str
    spec: SpecifierSet = field(default_factory=SpecifierSet)
    variant: str | None = None
    texts: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)  # why it is wanted when no requirement names it (a frontend)

    def describe(self) -> str:
        return " and ".join(self.texts) or self.name


@dataclass(frozen=True)
class Frameworks:
    """The declared frameworks, in order, with lookups by any name that means one."""

    items: tuple[Framework, ...] = ()
    frontends: tuple[Frontend, ...] = ()
    by_name: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        for fw in self.items:  # pip names: a framework with its own `package` is not installed by its name
            own = [fw.name] if fw.package is None else [fw.package] if "{" not in fw.package else []
            for name in (*own, *fw.aliases):
                self.by_name[canonicalize_name(name)] = fw

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(fw.name for fw in self.items)

    @property
    def companions(self) -> dict[str, Framework]:
        """Companion name -> the framework it pairs with."""
        return {c: fw for fw in self.items for c in fw.companions}

    def get(self, name: str) -> Framework | None:
        """By framework name (paddle) or any pip name that means one (paddlepaddle-gpu, mxnet-cu112)."""
        return next((fw for fw in self.items if fw.name == name), None) or self.pip(name)

    def pip(self, name: str) -> Framework | None:
        """The framework a pip distribution name means, None for any other (mxnet and paddlepaddle are CPU)."""
        found = self.by_name.get(canonicalize_name(name))
        return found or next((fw for fw in self.items if fw.variant_of_package(name)), None)

    @property
    def listing(self) -> tuple[str, ...]:
        """The order of every listing (stack, catalog, images/README.md): frameworks, then plain CUDA."""
        return self.names + (PLAIN,)

    def order(self, name: str) -> int:
        names = self.names
        return names.index(name) if name in names else len(names)

    def conda_names(self) -> dict[str, str]:
        return {c: fw.pip_name for fw in self.items for c in fw.conda}  # conda name -> the pip name to ask for

    def pip_aliases(self) -> dict[str, str]:
        return {canonicalize_name(a): fw.name for fw in self.items for a in fw.aliases}

    def cuda_of_local(self, tag: str) -> str | None:
        return next((c for fw in self.items if (c := fw.cuda_of_local(tag))), None)

    def split(self, requirements, known_variants: dict | None = None, env=None,
              env_from: str = "cudabox.yaml env:") -> tuple[dict[str, Want], list[str]]:
        """Requirements -> (a Want per framework or companion the matrix knows, the rest as written).

        The one place requirements are split: frameworks and companions are the resolver's;
        everything else (CPU builds included) passes through to pip. A companion alone brings its
        framework, and its local tag picks the framework's variant: the tags of a framework and its
        companions must name one CUDA (exit 3), and a tag is never dropped. `known_variants`
        (framework -> the variants the matrix has builds of) turns an extra naming no known
        variant (jax[cuda21]) into bad input. A frontend (keras) stays a pip requirement and brings
        the Want of its backend framework, chosen from `env` (KERAS_BACKEND) or the requirements.
        """
        wants: dict[str, Want] = {}
        others: list[str] = []
        companions = self.companions
        tags: dict[str, tuple[str, str]] = {}  # name -> (variant from a local tag, the requirement)
        for text in requirements:
            req = Requirement(text)
            name = canonicalize_name(req.name)
            fw = self.pip(name)
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
            by_name = fw.variant_of_package(req.name) if fw else None
            if by_name:
                self._one_variant(want, name, by_name)
                tags[name] = (by_name, text)
            for spec in req.specifier:
                version, _, local = spec.version.partition("+")
                post = fw.variant_of_post(version) if fw else None
                if post:
                    version = version.rsplit(".", 1)[0]
                    self._one_variant(want, name, post)
                    tags[name] = (post, text)
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
        self._frontends(wants, others, dict(env or {}), env_from)
        return wants, others

    def _frontends(self, wants: dict[str, Want], others: list[str], env: dict, env_from: str) -> None:
        present = list(wants)
        for text in list(others):
            req = Requirement(text)
            rule = next((r for r in self.frontends if canonicalize_name(r.name) == canonicalize_name(req.name)), None)
            if rule is None:
                continue
            framework, value, why = rule.backend(req, env, present, env_from)
            if framework is None:  # a CPU backend (numpy) asks for no CUDA framework
                continue
            want = wants.setdefault(framework, Want(framework))
            pairing = rule.pairing(req) if not rule._choosable(req) else SpecifierSet()
            if str(pairing):
                want.spec &= pairing
                want.texts.append(f"{framework}{pairing} (for {text})")
            want.why.append(f"{text}: backend {value} ({why}): {framework}'s stack"
                            + (f", {framework}{pairing}" if str(pairing) else ""))

    @staticmethod
    def _one_variant(want: Want, name: str, variant: str) -> None:
        if want.variant and want.variant != variant:
            raise Unsatisfiable("no stack satisfies the request", [
                f"{want.describe()} asks for two CUDA variants ({want.variant}, {variant}) of {name}"])
        want.variant = variant

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
