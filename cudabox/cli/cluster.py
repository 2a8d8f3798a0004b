"""`cudabox export slurm|k8s`, `cudabox jobs` and `cudabox fleet plan`.

Thin: parse, call cudabox.jobs (backends, slurm_run, k8s, fleet), print.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .options import COMMAND, IMAGE, JSON, NODES, PARTITION, PROJECT, REGISTRY, TIME, TRANSPORT
from .root import app

export_app = typer.Typer(help="Write what runs the project elsewhere: on a cluster (an sbatch script, a Kubernetes "
                              "Job; nothing is submitted), in an editor (devcontainer), in Compose.",
                         no_args_is_help=True, rich_markup_mode=None)
fleet_app = typer.Typer(help="Plan stacks for a fleet of GPU nodes (docs/fleet.md).", no_args_is_help=True,
                        rich_markup_mode=None)
app.add_typer(export_app, name="export")
app.add_typer(fleet_app, name="fleet")

CMD_SETTINGS = {"allow_interspersed_args": False}
SLURM_GPUS = typer.Option(0, "--gpus", min=0, metavar="N", help="GPUs per node to allocate (--gpus-per-node).")
RUNTIME = typer.Option("auto", "--runtime", metavar="auto|pyxis|docker|apptainer", envvar="CUDABOX_SLURM_RUNTIME",
                       help="auto (pyxis if srun has --container-image, else docker, else apptainer), pyxis, "
                            "docker, apptainer.")
SHARED_DIR = typer.Option(None, "--shared-dir", metavar="DIR", envvar="CUDABOX_SLURM_SHARED_DIR",
                          help="For --transport shared: a directory every node mounts.")
OUTPUT_DIR = typer.Option(None, "--output-dir", metavar="DIR", envvar="CUDABOX_SLURM_OUTPUT_DIR",
                          help="Where job scripts and output files go (default: PROJECT/.cudabox/slurm; nodes "
                               "must see it).")
ENV = typer.Option(None, "--env", "-e", metavar="KEY[=VAL]", help="Set a variable in the job (KEY alone: "
                                                                  "the submitting shell's value).")
SBATCH_ARG = typer.Option(None, "--sbatch-arg", metavar="--FLAG=VALUE",
                          help="An extra #SBATCH line (account, qos, constraint...); repeatable.")


@export_app.command("slurm", context_settings=CMD_SETTINGS)
def export_slurm(command: list[str] = COMMAND, partition: str = PARTITION, gpus: int = SLURM_GPUS,
                 time: str = TIME, nodes: int = NODES, transport: str = TRANSPORT, runtime: str = RUNTIME,
                 shared_dir: str = SHARED_DIR, registry: str = REGISTRY, output_dir: Path = OUTPUT_DIR,
                 image: str = IMAGE, env: list[str] = ENV, sbatch_arg: list[str] = SBATCH_ARG,
                 project: Path = PROJECT):
    """Print the sbatch script that runs CMD in the project's image on a compute node (nothing is submitted)."""
    import sys

    from ..jobs.backends import slurm_options
    from ..jobs.slurm_run import export

    opts = slurm_options(partition=partition, gpus=gpus, time=time, nodes=nodes, transport=transport,
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
    from ..jobs.backends import k8s_manifest
    from ..jobs.k8s import to_yaml

    manifest = k8s_manifest(project, list(command or ()), gpus=gpus, name=name, namespace=namespace,
                            shm_size=shm_size, registry=registry, image=image)

    text = to_yaml(manifest)
    if output_file is None:
        import sys

        sys.stdout.write(text)
        return
    from ..files import write_atomic

    write_atomic(output_file, text)
    output.console(stderr=True).print(f"wrote {output_file} (Job {manifest['metadata']['name']})")


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
               results_dir: Path = typer.Option(None, "--results-dir", metavar="DIR",
                                                help="Where the nodes' `cudabox check` results are (default: "
                                                     "STATE_DIR/checks); shown per node."),
               json: bool = JSON, project: Path = PROJECT):
    """Which stacks run on which nodes, and the newest stack that runs on all of them (or why none does)."""
    from ..jobs.fleet import last_checks, plan_fleet, to_dict
    from ..jobs.noderesults import load_results

    output.use_json(json)
    result = plan_fleet(project, inventory, with_=with_, python=python, cuda=cuda, driver=driver, gres_map=gres_map,
                        catalog=catalog, no_catalog=no_catalog, allow_forward_compat=allow_forward_compat)
    result.checks = last_checks(result.nodes, load_results(results_dir))
    if json:
        output.emit_json(to_dict(result))
    else:
        _print_fleet(result)
    if result.reasons:  # requirements were given and no stack runs on every node: like `resolve`, exit 3
        raise typer.Exit(3)


def _check_line(name: str, c: dict) -> str:
    if c["status"] == "failed":
        return f"{name} FAILED {', '.join(c['failed'])} ({c['checked_at']})"
    speed = f", GEMM {c['gemm_tflops']:.0f} TFLOPS" if c.get("gemm_tflops") is not None else ""
    return f"{name} {c['status']} ({c['checked_at']}, level {c['level']}{speed})"


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
        checked = [(n.name, result.checks[n.name]) for n in members if n.name in result.checks]
        if checked:
            con.print("  last check: " + "; ".join(e(_check_line(name, c)) for name, c in checked)
                      + (f"; {len(members) - len(checked)} never checked" if len(checked) < len(members) else ""))
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
