"""`Detected`: what the project files say, with where each fact came from (filled by detect and pyproject).

Also the small readers both share: a file's text, a needle's line, a requirement checked as PEP 508.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..errors import InputError
from ..files import MAX_INPUT_BYTES, display_path, printable, read_input_text, real_path
from ..knowledge.frameworks import Frameworks
from ..knowledge.loader import load_frameworks
from ..knowledge.values import python_spec
from .values import parse_requirement



@dataclass
class Detected:
    """A project's needs as found in its files, with where each fact came from."""

    requirements: list[str] = field(default_factory=list)  # PEP 508, in file order, deduplicated
    origins: dict[str, str] = field(default_factory=dict)  # requirement -> "file:line"
    python: str | None = None  # version or specifier ("3.11", ">=3.10")
    python_from: str | None = None
    cuda: str | None = None  # "12.1": a CUDA minor the files point at
    cuda_from: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # files read
    notes: list[str] = field(default_factory=list)  # what was skipped or assumed, one line each
    references: list[str] = field(default_factory=list)  # files cudabox.yaml can reference as they are
    in_references: set = field(default_factory=set)  # requirements and indexes those files carry
    cudnn: str | None = None
    cudnn_from: str | None = None
    system_packages: list[str] = field(default_factory=list)  # apt packages (cog.yaml)
    run: list[str] = field(default_factory=list)  # build steps (cog.yaml)
    unused: list[str] = field(default_factory=list)  # "file: why it was not used", one per file found
    pins: dict[str, tuple[str, str]] = field(default_factory=dict)  # lock files: name -> (version, where)
    env: dict = field(default_factory=dict)  # a frontend's backend variable the project sets (KERAS_BACKEND)
    env_from: dict = field(default_factory=dict)  # name -> "file:line"
    root: Path | None = None  # the project directory: file names are shown relative to it
    known: Frameworks | None = None  # frameworks.yaml (+ the project's overlays); loaded when first needed

    @property
    def registry(self) -> Frameworks:
        if self.known is None:
            self.known = load_frameworks(self.root)
        return self.known
    lenient: bool = False  # collect bad requirements in `errors` instead of raising the first
    errors: list[str] = field(default_factory=list)

    def show(self, path: Path) -> str:
        """How a file is named in the output and in cudabox.yaml: relative to the project, printable."""
        try:
            shown = str(real_path(path).relative_to(real_path(self.root))) if self.root else display_path(path)
        except ValueError:
            shown = display_path(path)
        return printable(shown)

    @property
    def frameworks(self) -> dict[str, str]:
        """Framework name -> the requirement that asks for it (torch -> "torch==2.1.0+cu121")."""
        wants, _ = self.registry.split(self.requirements)
        return {name: want.texts[0] for name, want in wants.items() if want.texts}

    def take(self, text: str, where: str, origin: str | None = None) -> bool:
        """Check `text` as PEP 508 (errors name `where`) and add it; see `add`."""
        try:
            req = parse_requirement(text, what=where, frameworks=self.registry)
        except InputError as exc:
            if not self.lenient:
                raise
            self.errors.append(str(exc))
            return False
        return self.add(req, origin or where)

    def add(self, text: str, where: str) -> bool:
        """Add a requirement; False when it had to be renamed (tensorflow-gpu -> tensorflow)."""
        req = Requirement(text)
        name = canonicalize_name(req.name)
        aliases = self.registry.pip_aliases()
        if name in aliases:
            new = aliases[name]
            self.notes.append(f"{where}: {req.name} is {new} for cudabox (same framework)")
            req.name = new
            text = str(req)
        for spec in req.specifier:
            cuda = self.registry.cuda_of_local(spec.version.partition("+")[2])
            if cuda:
                self.notes.append(f"{where}: {text} picks the CUDA {cuda} build (local version)")
        if text not in self.origins:
            self.requirements.append(text)
            self.origins[text] = where
        return name not in aliases

    def to_dict(self) -> dict:
        """For `init --json`."""
        return {"sources": self.sources, "requirements": self.requirements, "origins": self.origins,
                "references": self.references, "python": self.python, "cuda": self.cuda, "cudnn": self.cudnn,
                "system_packages": self.system_packages, "run": self.run, "extra_index_urls": self.extra_index_urls,
                "notes": self.notes, "unused": self.unused}

    def skip(self, shown: str, why: str) -> None:
        """A dependency file that was found and not used, with why (every one is named in the output)."""
        self.unused.append(f"{shown}: {why}")

    def replace_source(self, name: str, url: str, where: str) -> None:
        """A requirement that a source table (uv, Poetry) installs from a URL: `name @ url`, extras kept."""
        for i, text in enumerate(self.requirements):
            req = Requirement(text)
            if canonicalize_name(req.name) == canonicalize_name(name):
                req.url, req.specifier = url, type(req.specifier)()
                new = requirement(str(req), where)
                self.requirements[i] = new
                self.origins[new] = where
                return
        self.add(requirement(f"{name} @ {url}", where), where)

    def pin(self, name: str, version: str, where: str) -> None:
        self.pins.setdefault(canonicalize_name(name), (version, where))

    def apply_pins(self) -> None:
        """Lock files are the truth: their exact framework pins replace the ranges asked for."""
        for i, text in enumerate(self.requirements):
            req = Requirement(text)
            name = canonicalize_name(req.name)
            known = self.registry.get(name) or self.registry.companions.get(name)
            if known is None or name not in self.pins or req.url:
                continue
            version, where = self.pins[name]
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                self.notes.append(f"{where}: pins {name} {version}, outside {text!r}; kept {text!r}")
                continue
            req.specifier = type(req.specifier)(f"=={version}")
            new = str(req)
            self.requirements[i] = new
            self.origins[new] = f"{where} (lock file; asked {text!r} at {self.origins[text]})"

    def hint_cudnn(self, version: str, where: str) -> None:
        if not self.cudnn:
            self.cudnn, self.cudnn_from = version, where

    def hint_cuda(self, version: str, where: str) -> None:
        """Record a CUDA version the files point at (the first one wins; a different one is a note)."""
        if self.cuda and self.cuda != version:
            self.notes.append(f"{where}: points at CUDA {version}, but {self.cuda_from} at {self.cuda}; "
                              f"kept {self.cuda}")
            return
        if not self.cuda:
            self.cuda, self.cuda_from = version, where

    def hint_python(self, spec: str, where: str) -> None:
        python_spec(spec, what=where)  # a bad value is an error about its own file and line
        if self.python is None:
            self.python, self.python_from = spec, where

    def add_index(self, url: str, where: str) -> None:
        if url not in self.extra_index_urls:
            self.extra_index_urls.append(url)
        cuda = next((c for part in urlsplit(url).path.split("/") if (c := self.registry.cuda_of_local(part))), None)
        if cuda:  # an index of one CUDA build: download.pytorch.org/whl/cu121
            self.hint_cuda(cuda, f"{where} (index {url})")


def requirement(text: str, where: str) -> str:
    return parse_requirement(text, what=where, allow_url=True)  # URL requirements become notes


def read_text(path: Path, shown: str, limit: int = MAX_INPUT_BYTES) -> str:
    """A project file as UTF-8 text, read bounded (files.read_input): a device, a directory, a symlink loop,
    a file over `limit` or bytes that aren't UTF-8 are an InputError naming the file (and line)."""
    return read_input_text(path, limit=limit, shown=shown)


def line_of(raw: str, needle: str) -> int | None:
    for number, line in enumerate(raw.splitlines(), 1):
        if needle and needle in line:
            return number
    return None


# --------------------------------------------------------------------------- requirements.txt
