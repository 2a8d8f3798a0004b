"""`Detected`: what the project files say, with where each fact came from (filled by detect and pyproject).

Also the small readers both share: a file's text, a needle's line, a requirement checked as PEP 508.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..errors import located
from ..knowledge.frameworks import Frameworks
from ..knowledge.loader import load_frameworks
from ..files import display_path
from ..knowledge.values import python_spec
from .spec import parse_requirement



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
    requirements_file: str | None = None  # a requirements.txt cudabox.yaml can reference as it is
    in_requirements_file: set = field(default_factory=set)  # requirements and indexes it carries
    root: Path | None = None  # the project directory: file names are shown relative to it
    known: Frameworks | None = None  # frameworks.yaml (+ the project's overlays); loaded when first needed

    @property
    def registry(self) -> Frameworks:
        if self.known is None:
            self.known = load_frameworks(self.root)
        return self.known

    def show(self, path: Path) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve())) if self.root else display_path(path)
        except ValueError:
            return display_path(path)

    @property
    def frameworks(self) -> dict[str, str]:
        """Framework name -> the requirement that asks for it (torch -> "torch==2.1.0+cu121")."""
        wants, _ = self.registry.split(self.requirements)
        return {name: want.texts[0] for name, want in wants.items() if want.texts}

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


def read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise located(shown, None, f"cannot read: {exc}") from None


def line_of(raw: str, needle: str) -> int | None:
    for number, line in enumerate(raw.splitlines(), 1):
        if needle and needle in line:
            return number
    return None


# --------------------------------------------------------------------------- requirements.txt
