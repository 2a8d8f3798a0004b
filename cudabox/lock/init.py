"""`cudabox init`'s file plan: a commented cudabox.yaml, cudabox.lock and a .dockerignore.

Everything is computed first (detection, host, resolution), then written, each
file atomically. When detection or resolution fails (exit 2 or 3) init still
leaves a cudabox.yaml: what it detected, with the reasons and the ways out as
comments at the top, so the user has a file to edit instead of nothing; the
error is raised after writing, so the exit code tells scripts. Existing files
are never overwritten without `force`; an existing .dockerignore is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..project.detected import Detected
from ..errors import CudaboxError, InputError, Unsatisfiable
from ..knowledge.values import flag_values
from ..files import display_path, write_atomic
from .lockfile import LOCK_FILE
from ..project.scaffold import DOCKERIGNORE, DOCKERIGNORE_TEXT, spec_yaml
from ..project.spec import SPEC_FILE, default_name


@dataclass
class Plan:
    """What init will write, and the facts behind it (for printing before asking)."""

    directory: Path
    detected: Detected
    files: dict[str, str]  # file name -> content, written in this order
    resolution: object  # project.Resolution
    kept: list[str] = field(default_factory=list)  # existing files left as they are
    assumed: list[str] = field(default_factory=list)  # what init assumed, one line each
    error: CudaboxError | None = None  # why there is no lock: raised after the files are written


def detect_or_report(directory: Path, **how) -> tuple[Detected, CudaboxError | None]:
    """Detection that never leaves init empty-handed: a file it can't read is the error, with nothing found."""
    from ..project.survey import detect

    try:
        found = detect(directory, lenient=True, **how)
    except InputError as exc:  # a file that can't be read at all (invalid TOML/YAML, --from missing)
        return Detected(root=Path(directory)), exc
    if found.errors:
        more = len(found.errors) - 1
        more = f" (and {more} more, listed at the top of cudabox.yaml)" if more else ""
        return found, InputError(found.errors[0] + more)
    return found, None


def plan_init(directory: Path, found: Detected, *, python: str | None = None, cuda: str | None = None,
              gpus: tuple[str, ...] = (), driver: str | None = None, no_host: bool = False,
              force: bool = False, error: CudaboxError | None = None,
              refuse_eol_images: bool = False, packages: bool = True) -> Plan:
    """Resolve what was detected and prepare the files; raises (writing nothing) only for bad flags and
    files that exist. A detection `error`, an invalid detected value or an unsatisfiable request give a
    Plan with only cudabox.yaml (the reasons at its top) and `error` set."""
    from .. import host as host_mod
    from .resolution import lock_project
    from ..project.spec import load_spec

    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    for name in (SPEC_FILE, LOCK_FILE):
        if (directory / name).exists() and not force:
            raise InputError(f"{display_path(directory / name)} exists; pass --force to overwrite it "
                             "(or edit it and run `cudabox lock`)")
    flag_values(python=python, cuda=cuda, driver=driver)  # a bad flag fails before anything is read
    host = host_mod.detect(ignore=no_host)
    values = dict(python=python or found.python, cuda=cuda or found.cuda, gpus=list(gpus), driver=driver, host=host,
                  python_from="--python" if python else found.python_from,
                  cuda_from="--cuda" if cuda else found.cuda_from, refuse_eol_images=refuse_eol_images)
    name = default_name(directory)
    text = spec_yaml(name, found, **values)
    res = None
    if error is None:
        try:  # validate what init would write, before writing anything
            spec = replace(load_spec(directory, text=text), source_file=SPEC_FILE)
        except InputError as exc:
            error = InputError(f"{exc} (in the cudabox.yaml init wrote; check the detected values)")
        else:
            try:
                res, lock = lock_project(spec, no_host=no_host, host=host, packages=packages)
            except (InputError, Unsatisfiable) as exc:
                error = exc
    kept = [DOCKERIGNORE] if (directory / DOCKERIGNORE).exists() and not force else []
    if error is not None:
        problem = [f"exit 2: {e}" for e in found.errors] if found.errors else _problem(error)
        files = {SPEC_FILE: spec_yaml(name, found, **values, problem=problem)}
        if not kept:
            files[DOCKERIGNORE] = DOCKERIGNORE_TEXT
        return Plan(directory=directory, detected=found, files=files, resolution=None, kept=kept, error=error)
    files = {SPEC_FILE: text, LOCK_FILE: lock.to_json()}
    if not kept:
        files[DOCKERIGNORE] = DOCKERIGNORE_TEXT
    assumed = []
    if not gpus and not driver and not host.gpus and not host.driver:
        assumed.append(("host ignored (--no-host)" if host.ignored else "no NVIDIA driver or GPU on this host")
                       + f": the lock sets no driver limit; the image needs a driver that runs CUDA "
                       f"{res.stack.cuda} (>= {res.stack.min_driver or '?'}), checked by `cudabox run`")
    return Plan(directory=directory, detected=found, files=files, resolution=res, kept=kept, assumed=assumed)


def _problem(error: CudaboxError) -> list[str]:
    """The comment lines at the top of a cudabox.yaml that could not be locked."""
    if isinstance(error, Unsatisfiable):
        return [f"exit 3: {error.message}:"] + [f"  - {r}" for r in error.reasons]
    return [f"exit 2: {error}"]


def write_plan(plan: Plan) -> list[Path]:
    written = []
    for name, content in plan.files.items():
        path = plan.directory / name
        write_atomic(path, content)
        written.append(path)
    if LOCK_FILE in plan.files:
        from .known import remember_project

        remember_project(plan.directory)  # `cudabox images` says which projects use an image
    return written
