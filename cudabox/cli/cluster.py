"""`cudabox export slurm|k8s`, `cudabox jobs`, `cudabox fleet plan`, and the `run --on slurm|k8s` backends.

Thin: parse, call cudabox.jobs: slurm / slurm_run / k8s / k8s_run / fleet, print.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .root import app

export_app = typer.Typer(help="Print what runs the project on a cluster (an sbatch script, a Kubernetes Job) "
                              "without submitting it.", no_args_is_help=True, rich_markup_mode=None)
fleet_app = typer.Typer(help="Plan stacks for a fleet of GPU nodes (docs/fleet.md).", no_args_is_help=True,
                        rich_markup_mode=None)
app.add_typer(export_app, name="export")
app.add_typer(fleet_app, name="fleet")

JSON = typer.Option(False, "--json", help="Print one JSON object for scripts.")
PROJECT = typer.Option(Path("."), "--project", "-C", metavar="DIR", help="Project directory (holds cudabox.lock).")
COMMAND = typer.Argument(None, metavar="-- CMD...", help="The command to run in the project's image.")
CMD_SETTINGS = {"allow_interspersed_args": False}

# Slurm flags, shared by `export slurm` and `run --on slurm` (each has an environment default).
PARTITION = typer.Option(None, "--partition", metavar="P", envvar="CUDABOX_SLURM_PARTITION",
                         help="Slurm partition (default: the cluster's).")
TIME = typer.Option(None, "--time", metavar="T", envvar="CUDABOX_SLURM_TIME",
                    help="Time limit: minutes, HH:MM:SS or D-HH:MM:SS.")
NODES = typer.Option(1, "--nodes", min=1, metavar="N", help="Nodes; the command runs once per node.")
SLURM_GPUS = typer.Option(0, "--gpus", min=0, metavar="N", help="GPUs per node to allocate (--gpus-per-node).")
TRANSPORT = typer.Option("local", "--transport", metavar="local|shared|registry", envvar="CUDABOX_SLURM_TRANSPORT",
                         help="How the image reaches the nodes: local (already in the node's engine: single "
                              "node), shared (docker save to --shared-dir), registry (pull from --registry).")
RUNTIME = typer.Option("auto", "--runtime", metavar="auto|pyxis|docker|apptainer", envvar="CUDABOX_SLURM_RUNTIME",
                       help="auto (pyxis if srun has --container-image, else docker, else apptainer), pyxis, "
                            "docker, apptainer.")
SHARED_DIR = typer.Option(None, "--shared-dir", metavar="DIR", envvar="CUDABOX_SLURM_SHARED_DIR",
                          help="For --transport shared: a directory every node mounts.")
REGISTRY = typer.Option(None, "--registry", metavar="HOST/PATH", envvar="CUDABOX_REGISTRY",
                        help="Registry prefix the nodes pull from (--transport registry; k8s image prefix).")
OUTPUT_DIR = typer.Option(None, "--output-dir", metavar="DIR", envvar="CUDABOX_SLURM_OUTPUT_DIR",
                          help="Where job scripts and output files go (default: PROJECT/.cudabox/slurm; nodes "
                               "must see it).")
IMAGE = typer.Option(None, "--image", metavar="REF", help="Run this image instead of the project's.")
ENV = typer.Option(None, "--env", "-e", metavar="KEY[=VAL]", help="Set a variable in the job (KEY alone: "
                                                                  "the submitting shell's value).")
SBATCH_ARG = typer.Option(None, "--sbatch-arg", metavar="--FLAG=VALUE",
                          help="An extra #SBATCH line (account, qos, constraint...); repeatable.")


def _slurm_options(**kw):
    from ..jobs.slurm_run import SlurmOptions

    kw["env"] = tuple(kw.get("env") or ())
    kw["sbatch_args"] = tuple(kw.get("sbatch_args") or ())
    return SlurmOptions(**kw)


@export_app.command("slurm", context_settings=CMD_SETTINGS)
def export_slurm(command: list[str] = COMMAND, partition: str = PARTITION, gpus: int = SLURM_GPUS,
                 time: str = TIME, nodes: int = NODES, transport: str = TRANSPORT, runtime: str = RUNTIME,
                 shared_dir: str = SHARED_DIR, registry: str = REGISTRY, output_dir: Path = OUTPUT_DIR,
                 image: str = IMAGE, env: list[str] = ENV, sbatch_arg: list[str] = SBATCH_ARG,
                 project: Path = PROJECT):
    """Print the sbatch script that runs CMD in the project's image on a compute node (nothing is submitted)."""
    import sys

    from ..jobs.slurm_run import export

    opts = _slurm_options(partition=partition, gpus=gpus, time=time, nodes=nodes, transport=transport,
                          runtime=runtime, shared_dir=shared_dir, registry=registry, output_dir=output_dir,
                          image=image, env=env, sbatch_args=sbatch_arg)
    sys.stdout.write(export(project, list(command or ()), opts))


@export_app.command("k8s", context_settings=CMD_SETTINGS)
def export_k8s(command: list[str] = COMMAND,
               output_file: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                                help="Write the Job here (atomically) instead of printing it."),
               gpus: int = typer.Option(1, "--gpus", min=0, metavar="N", help="nvidia.com/gpu limit."),
               name: str = typer.Option(None, "--name", metavar="NAME", help="Job name (default: cudabox-PROJECT-LOCKHASH)."),
               namespace: str = typer.Option(None, "--namespace", "-n", metavar="NS", help="metadata.namespace."),
               shm_size: str = typer.Option(None, "--shm-size", metavar="QTY", help="/dev/shm size limit (8Gi)."),
               registry: str = REGISTRY, image: str = IMAGE, project: Path = PROJECT):
    """A batch/v1 Job for CMD: the project's image, GPU limits, node affinity from the stack, non-root."""
    manifest = _k8s_manifest(project, list(command or ()), gpus=gpus, name=name, namespace=namespace,
                             shm_size=shm_size, registry=registry, image=image)
    from ..jobs.k8s import to_yaml

    text = to_yaml(manifest)
    if output_file is None:
        import sys

        sys.stdout.write(text)
        return
    from ..files import write_atomic

    write_atomic(output_file, text)
    output.console(stderr=True).print(f"wrote {output_file} (Job {manifest['metadata']['name']})")


def _k8s_manifest(project: Path, command: list[str], *, gpus: int, name=None, namespace=None, shm_size=None,
                  registry=None, image=None, lock=None) -> dict:
    from ..image.build import project_tag
    from ..jobs.k8s import job
    from ..lock.lockfile import read_lock
    from ..knowledge.loader import load

    lock = lock or read_lock(project)
    ref = image or project_tag(lock)
    if registry and not image:
        ref = f"{registry.rstrip('/')}/{ref}"
    return job(load(project), lock, image=ref, command=command, name=name, gpus=gpus, namespace=namespace,
               shm_size=shm_size)


@app.command()
def jobs(json: bool = JSON, all_: bool = typer.Option(False, "--all", "-a", help="Every user's cudabox jobs.")):
    """List your cudabox Slurm jobs (pending, running, and recently ended) with their state and exit code."""
    from ..jobs.slurm_run import list_jobs

    output.use_json(json)
    rows = list_jobs(all_users=all_)
    if json:
        output.emit_json({"jobs": rows})
        return
    print(f"{'JOBID':>8}  {'PROJECT':16} {'STATE':11} {'EXIT':5} {'ELAPSED':>10}  {'NODES':10} OUTPUT")
    for r in rows:
        print(f"{r['job_id']:>8}  {r['project'] or '-':16} {r['state']:11} {r['exit_code'] or '-':5} "
              f"{r['elapsed'] or '-':>10}  {r['nodes'] or '-':10} {r['output'] or '-'}")


# --------------------------------------------------------------------------- run --on slurm|k8s


def run_on(on: str, opts, *, partition=None, time=None, nodes=1, transport="local", runtime=None,
           shared_dir=None, registry=None, push=None, output_dir=None, image=None) -> int:
    """The cluster backends of `cudabox run` (cudabox/cli/run.py dispatches here for --on slurm|k8s).
    What `run` has no flag for comes from the environment, as documented in docs/slurm.md."""
    import os

    from ..errors import InputError

    env = os.environ.get
    runtime = runtime or env("CUDABOX_SLURM_RUNTIME") or "auto"
    shared_dir = shared_dir or env("CUDABOX_SLURM_SHARED_DIR")
    registry = registry or env("CUDABOX_REGISTRY")
    output_dir = output_dir or env("CUDABOX_SLURM_OUTPUT_DIR")
    push = push if push is not None else env("CUDABOX_PUSH", "") not in ("", "0")

    unsupported = [flag for flag, value in (("--publish", opts.ports), ("--volume", opts.volumes),
                                            ("--interactive", opts.interactive), ("--tty", opts.tty)) if value]
    if unsupported:
        raise InputError(f"{', '.join(unsupported)}: not available with --on {on}")
    gpus = _gpu_count(opts.gpus, on)
    if on == "slurm":
        from ..jobs.slurm_run import run

        sopts = _slurm_options(partition=partition, gpus=gpus, time=time, nodes=nodes, transport=transport,
                               runtime=runtime, shared_dir=shared_dir, registry=registry, push=push,
                               output_dir=output_dir, image=image, env=opts.env)
        return run(opts.project, list(opts.command), sopts, detach=opts.detach)
    if on == "k8s":
        from ..jobs.k8s_run import submit
        from ..jobs.run import fresh_lock

        if opts.env:
            raise InputError(f"--env: not available with --on {on} (bake variables into cudabox.yaml's env:)")
        lock = fresh_lock(Path(opts.project))
        manifest = _k8s_manifest(Path(opts.project), list(opts.command), gpus=1 if gpus is None else gpus,
                                 name=opts.name, registry=registry, image=image, lock=lock)
        return submit(manifest, detach=opts.detach)
    raise InputError(f"--on {on}: expected local, slurm or k8s")


def _gpu_count(text, on: str) -> int | None:
    from ..errors import InputError

    if text in (None, ""):
        return None if on == "k8s" else 0
    if text == "none":
        return 0
    if not str(text).isdigit():
        raise InputError(f"--gpus {text}: with --on {on}, --gpus is a number of GPUs per node")
    return int(text)


# --------------------------------------------------------------------------- fleet plan


@fleet_app.command("plan")
def fleet_plan(inventory: Path = typer.Option(..., "--inventory", "-i", metavar="FILE",
                                              help="Nodes: a YAML list, `kubectl get nodes -o json`, or "
                                                   "`scontrol show nodes` / `sinfo -N -h -o \"%N %G %f\"` output."),
               with_: list[str] = typer.Option(None, "--with", "-w", metavar="REQ",
                                               help="Requirements to resolve for the whole fleet (default: "
                                                    "./cudabox.yaml when present)."),
               python: str = typer.Option(None, "--python", metavar="SPEC", help="Python version or specifier for --with."),
               cuda: str = typer.Option(None, "--cuda", metavar="SPEC", help="CUDA version for --with."),
               driver: str = typer.Option(None, "--driver", metavar="VERSION",
                                          help="Driver of nodes whose inventory entry names none (Slurm)."),
               gres_map: list[str] = typer.Option(None, "--gres-map", metavar="TYPE=GPU",
                                                  help="Map a Slurm GRES type to a GPU model (a100=A100)."),
               catalog: Path = typer.Option(None, "--catalog", metavar="DIR",
                                            help="Catalog stacks to place (default: images/ of cudabox)."),
               no_catalog: bool = typer.Option(False, "--no-catalog", help="Place only the project's lock."),
               allow_forward_compat: bool = typer.Option(False, "--allow-forward-compat",
                                                         help="Count CUDA forward compatibility (non-slim "
                                                              "stacks on datacenter GPUs)."),
               json: bool = JSON, project: Path = PROJECT):
    """Which stacks run on which nodes, and the newest stack that runs on all of them (or why none does)."""
    from ..jobs import fleet
    from ..ci.workflow import catalog_dir
    from ..jobs.inventory import Options, read_inventory
    from ..knowledge.loader import load

    output.use_json(json)
    m = load(project)
    pairs = []
    for item in gres_map or ():
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            from ..errors import InputError

            raise InputError(f"--gres-map {item!r}: expected TYPE=GPU (e.g. a100=A100)")
        pairs.append((key, value))
    nodes = read_inventory(inventory, m, Options(default_driver=driver, gres_map=tuple(pairs)))
    cands = fleet.candidates(project, None if no_catalog else (catalog or catalog_dir()))
    result = fleet.plan(m, nodes, cands, _fleet_request(project, m, with_, python, cuda),
                        allow_forward_compat=allow_forward_compat)
    if json:
        output.emit_json(fleet.to_dict(result))
    else:
        _print_fleet(result)
    if result.reasons:  # requirements were given and no stack runs on every node: like `resolve`, exit 3
        raise typer.Exit(3)


def _fleet_request(project: Path, m, with_, python, cuda):
    from dataclasses import replace

    from ..knowledge.values import flag_values
    from ..resolve.request import Request, request_from_spec
    from ..project.spec import load_spec, spec_from_flags

    values = flag_values(python=python, cuda=cuda)
    if with_:
        return request_from_spec(spec_from_flags(project, list(with_), **values), m)
    if (Path(project) / "cudabox.yaml").exists():
        spec = replace(load_spec(project), gpus=(), driver=None, **values)
        return request_from_spec(spec, m)
    if values.get("cuda"):
        return Request(python=values.get("python"), cuda=values["cuda"])
    return None


def _print_fleet(result) -> None:
    from rich.markup import escape as e
    from rich.table import Table

    from ..jobs.fleet import describe

    con = output.console()
    for klass in result.classes:
        gpu, driver = klass
        members = result.members(klass)
        window = result.windows[klass]
        span = f"CUDA {window[0]}–{window[-1]}" if window else "no CUDA"
        con.print(f"[bold]{e(gpu)}[/], driver {driver}: {len(members)} node(s) "
                  f"({e(', '.join(n.name for n in members[:6]))}{' …' if len(members) > 6 else ''}); runs {span}")
    if result.candidates:
        table = Table(title="stacks × node classes", box=None, padding=(0, 1))
        table.add_column("stack")
        for i, _ in enumerate(result.classes, 1):
            table.add_column(f"#{i}", justify="center")
        for c in result.candidates:
            marks = [("[green]✓[/]" if result.verdicts[(c.name, k)].ok else "[red]✗[/]") for k in result.classes]
            table.add_row(e(c.name), *marks)
        con.print(table)
        con.print("  " + "; ".join(f"#{i}: {e(g)} @ {d}" for i, (g, d) in enumerate(result.classes, 1)))
        newest = result.newest_everywhere()
        if newest:
            con.print("[bold]Newest that runs on every node:[/] " + ", ".join(e(c.name) for c in newest.values()))
        else:
            con.print("[bold]No listed stack runs on every node.[/]")
    if result.stack is not None:
        con.print(f"[bold]Fleet stack for {e(' '.join(result.requirements) or 'the project')}:[/] "
                  f"{e(describe(result.stack))}")
    elif result.reasons:
        con.print(f"[bold red]No single stack for {e(' '.join(result.requirements) or 'the project')} runs on "
                  "every node:[/]")
        for reason in result.reasons:
            con.print(f"  - {e(reason)}")
        for (gpu, driver), own in result.per_class.items():
            text = describe(own) if not isinstance(own, list) else own[0]
            con.print(f"  on {e(gpu)} @ {driver} alone: {e(text)}")
