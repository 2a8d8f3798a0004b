"""`cudabox init`'s file plan: a commented cudabox.yaml, cudabox.lock and a .dockerignore.

Everything is computed first (detection, host, resolution) and written only
when all of it succeeded, each file atomically: a failed or refused init
leaves the project exactly as it was. Existing files are never overwritten
without `force`; an existing .dockerignore is the project's own and is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..project.detected import Detected
from ..errors import InputError
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


def plan_init(directory: Path, found: Detected, *, python: str | None = None, cuda: str | None = None,
              gpus: tuple[str, ...] = (), driver: str | None = None, no_host: bool = False,
              force: bool = False) -> Plan:
    """Detect, resolve and prepare the files; raises before anything is written."""
    from .. import host as host_mod
    from .lockfile import make_lock
    from .resolution import resolve_project
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
    python_from = "--python" if python else found.python_from
    cuda_from = "--cuda" if cuda else found.cuda_from
    text = spec_yaml(default_name(directory), found, python=python or found.python, cuda=cuda or found.cuda,
                     gpus=list(gpus), driver=driver, host=host, python_from=python_from, cuda_from=cuda_from)
    try:  # validate what init would write, before writing anything
        spec = replace(load_spec(directory, text=text), source_file=SPEC_FILE)
    except InputError as exc:
        raise InputError(f"{exc} (in the cudabox.yaml init would write; check the detected values)") from None
    res = resolve_project(spec, no_host=no_host, host=host)
    lock = make_lock(spec, res.stack, list(res.others))
    files = {SPEC_FILE: text, LOCK_FILE: lock.to_json()}
    kept = []
    if (directory / DOCKERIGNORE).exists() and not force:
        kept.append(DOCKERIGNORE)
    else:
        files[DOCKERIGNORE] = DOCKERIGNORE_TEXT
    assumed = []
    if not gpus and not driver and not host.gpus and not host.driver:
        assumed.append(("host ignored (--no-host)" if host.ignored else "no NVIDIA driver or GPU on this host")
                       + f": the lock sets no driver limit; the image needs a driver that runs CUDA "
                       f"{res.stack.cuda} (>= {res.stack.min_driver or '?'}), checked by `cudabox run`")
    return Plan(directory=directory, detected=found, files=files, resolution=res, kept=kept, assumed=assumed)




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
