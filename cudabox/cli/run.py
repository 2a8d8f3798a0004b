"""`cudabox init`, `run`, `shell`, `exec`, `ps`, `logs`, `stop` and `doctor`: a project's daily commands.

Thin: parse, call cudabox.project.detect / lock.init / jobs.run / jobs.doctor, print.
`run` collects its flags into a RunOptions and hands it to the backend `--on`
names (cudabox.jobs.backends: local, slurm, k8s).
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import output
from .options import JSON, NO_HOST, NODES, PARTITION, PROJECT, TIME, TRANSPORT
from .root import app

GPUS = typer.Option(None, "--gpus", metavar="GPUS",
                    help="all | none | 0,2 (indexes) | GPU-<uuid>. Default: all when the host has NVIDIA GPUs.")
ENV = typer.Option(None, "--env", "-e", metavar="KEY[=VAL]", help="Set a variable (KEY alone: the host's value).")
ENV_FILE = typer.Option(None, "--env-file", metavar="FILE", help="KEY=VAL lines, like docker's.")
PORT = typer.Option(None, "--publish", "-p", metavar="[IP:][HOST:]PORT", help="Publish a container port.")
VOLUME = typer.Option(None, "--volume", "-v", metavar="SRC:DST[:ro]", help="Mount a host path or named volume.")
WORKDIR = typer.Option(None, "--workdir", "-w", metavar="PATH",
                       help="Where the project is mounted and the job starts (default: the lock's, /workspace).")
NAME = typer.Option(None, "--name", metavar="NAME", help="Container name (default: the engine's).")
USER = typer.Option(None, "--user", "-u", metavar="UID[:GID]",
                    help="Run as this user (default: yours, so files written to the project stay yours).")
IPC = typer.Option("host", "--ipc", metavar="MODE", help="IPC namespace: host (default, for DataLoader "
                                                         "workers), private, shareable.")
SHM = typer.Option(None, "--shm-size", metavar="SIZE", help="/dev/shm size (e.g. 16g); implies a private IPC.")
TTY = typer.Option(None, "--tty/--no-tty", "-t/-T", help="Allocate a TTY (default: when stdin and stdout are one).")
INTERACTIVE = typer.Option(False, "--interactive", "-i", help="Keep stdin open (pipe data into the job).")
KEEP = typer.Option(False, "--keep", help="Keep the container after the job ends (for docker inspect).")
NO_CACHES = typer.Option(False, "--no-caches", help="Don't mount the host's pip/uv/Hugging Face/torch caches.")
NO_MOUNT = typer.Option(False, "--no-mount", help="Use the project copy baked into the image; don't mount it.")
# --- `run --on slurm|k8s`: the backends are cudabox.jobs.backends (docs/slurm.md, kubernetes.md)
ON = typer.Option("local", "--on", metavar="WHERE", help="local (this machine's engine, default), slurm (an sbatch "
                                                         "job on the cluster) or k8s (a Job; needs cudabox[k8s]).")


def _dispatch(opts, on: str = "local", **cluster) -> int:
    from ..jobs.backends import Cluster, run

    return run(on, opts, Cluster(**cluster))


def _options(project, **kw):
    from ..jobs.run import RunOptions

    return RunOptions(project=Path(project), env=list(kw.pop("env") or []),
                      env_files=list(kw.pop("env_file") or []), ports=list(kw.pop("publish") or []),
                      volumes=list(kw.pop("volume") or []), **kw)


@app.command(context_settings={"allow_interspersed_args": False})
def run(command: list[str] = typer.Argument(None, metavar="-- CMD...", help="The command to run in the stack."),
        gpus: str = GPUS, env: list[str] = ENV, env_file: list[Path] = ENV_FILE, publish: list[str] = PORT,
        volume: list[str] = VOLUME, workdir: str = WORKDIR, name: str = NAME, user: str = USER, ipc: str = IPC,
        shm_size: str = SHM, tty: bool = TTY, interactive: bool = INTERACTIVE,
        detach: bool = typer.Option(False, "--detach", "-d", help="Start the job and print its name "
                                                                  "(see cudabox ps / logs / stop)."),
        keep: bool = KEEP, no_caches: bool = NO_CACHES, no_mount: bool = NO_MOUNT, no_host: bool = NO_HOST,
        project: Path = PROJECT, on: str = ON, partition: str = PARTITION, time: str = TIME,
        nodes: int = NODES, transport: str = TRANSPORT):
    """Run CMD in the project's stack (locks and builds first when needed); exits with CMD's exit code.
    With --on slurm|k8s it runs on the cluster instead (--gpus is then a count per node)."""
    if not command:
        raise typer.BadParameter("give the command after --, e.g. `cudabox run -- python train.py`",
                                 param_hint="CMD")
    opts = _options(project, command=list(command), gpus=gpus, env=env, env_file=env_file, publish=publish,
                    volume=volume, workdir=workdir, name=name, user=user, ipc=ipc, shm_size=shm_size, tty=tty,
                    interactive=interactive, detach=detach, keep=keep, caches=not no_caches,
                    mount_project=not no_mount, no_host=no_host)
    raise typer.Exit(_dispatch(opts, on, partition=partition, time=time, nodes=nodes, transport=transport))


SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"]


@app.command()
def shell(gpus: str = GPUS, env: list[str] = ENV, env_file: list[Path] = ENV_FILE, publish: list[str] = PORT,
          volume: list[str] = VOLUME, workdir: str = WORKDIR, name: str = NAME, user: str = USER, ipc: str = IPC,
          shm_size: str = SHM, no_caches: bool = NO_CACHES, no_host: bool = NO_HOST, project: Path = PROJECT):
    """An interactive shell (bash, else sh) in the project's stack; the container goes when it exits."""
    opts = _options(project, command=SHELL, gpus=gpus, env=env, env_file=env_file, publish=publish, volume=volume,
                    workdir=workdir, name=name, user=user, ipc=ipc, shm_size=shm_size, tty=None, interactive=True,
                    caches=not no_caches, no_host=no_host)
    raise typer.Exit(_dispatch(opts))


@app.command("exec", context_settings={"allow_interspersed_args": False})
def exec_(job: str = typer.Argument(..., metavar="NAME", help="A running job (cudabox ps)."),
          command: list[str] = typer.Argument(None, metavar="-- CMD..."), tty: bool = TTY,
          interactive: bool = INTERACTIVE, env: list[str] = ENV):
    """Run CMD inside a running job (as the job's user); exits with CMD's exit code."""
    import sys

    from ..jobs.run import RunOptions, engine, parse_env
    from ..jobs.run_io import exec_in

    command = list(command or [])[1:] if (command or [None])[0] == "--" else list(command or [])
    if not command:  # (with NAME first, the parser keeps the `--`)
        raise typer.BadParameter("give the command after --, e.g. `cudabox exec NAME -- nvidia-smi`",
                                 param_hint="CMD")
    tty = sys.stdin.isatty() and sys.stdout.isatty() if tty is None else tty
    extra = parse_env(RunOptions(env=list(env or [])), environ={})
    raise typer.Exit(exec_in(engine(), job, list(command), tty=tty, stdin=interactive or tty, env=extra))


@app.command()
def ps(all_: bool = typer.Option(False, "--all", "-a", help="Include jobs that have ended."), json: bool = JSON):
    """List cudabox jobs (containers with the io.cudabox.run label)."""
    from ..jobs.run import engine
    from ..jobs.run_io import jobs

    output.use_json(json)
    rows = jobs(engine(), all_=all_)
    if json:
        output.emit_json({"jobs": rows})
        return
    print(f"{'NAME':28} {'PROJECT':16} {'STATUS':24} COMMAND")
    for r in rows:
        print(f"{r['name']:28} {r['project'] or '-':16} {r['status']:24} {r['command']}")


@app.command()
def logs(job: str = typer.Argument(..., metavar="NAME"),
         follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing as the job writes."),
         tail: str = typer.Option("all", "--tail", metavar="N", help="Only the last N lines.")):
    """Print a job's output (stdout to stdout, stderr to stderr)."""
    from ..jobs.run import engine
    from ..jobs.run_io import logs as job_logs

    job_logs(engine(), job, follow=follow, tail=tail)


@app.command()
def stop(jobs_: list[str] = typer.Argument(..., metavar="NAME..."), keep: bool = KEEP,
         time: int = typer.Option(10, "--time", "-t", metavar="SECONDS", help="Seconds between SIGTERM and SIGKILL.")):
    """Stop jobs (SIGTERM, then SIGKILL) and remove their containers."""
    from ..jobs.run import engine
    from ..jobs.run_io import stop as stop_job

    eng = engine()
    for job in jobs_:
        print(stop_job(eng, job, keep=keep, timeout=time))


@app.command()
def init(path: Path = typer.Argument(Path("."), help="Project directory."),
         yes: bool = typer.Option(False, "--yes", "-y",
                                  help="No questions: write the files, take the GPU requirements variant."),
         force: bool = typer.Option(False, "--force", help="Overwrite cudabox.yaml, cudabox.lock, .dockerignore."),
         with_: list[str] = typer.Option(None, "--with", metavar="REQ",
                                         help="A requirement to add to what was detected (repeatable)."),
         from_: Path = typer.Option(None, "--from", metavar="FILE",
                                    help="Read only this dependency file instead of detecting."),
         extra: list[str] = typer.Option(None, "--extra", metavar="NAME",
                                         help="Include this optional-dependency group of pyproject.toml "
                                              "(repeatable)."),
         gpu: list[str] = typer.Option(None, "--gpu", "-g", metavar="GPU", help="A GPU the image must run on."),
         driver: str = typer.Option(None, "--driver", metavar="VERSION", help="Oldest driver it must run on."),
         python: str = typer.Option(None, "--python", metavar="SPEC", help="Python version or specifier."),
         cuda: str = typer.Option(None, "--cuda", metavar="SPEC", help="CUDA version (projects with no framework)."),
         refuse_eol_images: bool = typer.Option(
             False, "--refuse-eol-images",
             help="Refuse end-of-life nvidia/cuda tags (written to cudabox.yaml as refuse_eol_images: true)."),
         no_packages: bool = typer.Option(False, "--no-packages",
                                          help="Lock the stack only, no package pins (offline; run `cudabox lock` "
                                               "before building)."),
         no_host: bool = NO_HOST, json: bool = JSON):
    """Detect what the project needs, resolve, and write cudabox.yaml, cudabox.lock and .dockerignore.

    When it can't resolve (exit 2 or 3) it still writes cudabox.yaml, with the reasons at the top."""
    import sys

    from ..lock.init import detect_or_report, plan_init, write_plan

    output.use_json(json)
    interactive = not yes and not json and sys.stdin.isatty()
    choose = _choose_variant if interactive else None
    found, error = detect_or_report(path, from_file=from_, with_=tuple(with_ or ()), extras=tuple(extra or ()),
                                    choose=choose)
    plan = plan_init(path, found, python=python, cuda=cuda, gpus=tuple(gpu or ()), driver=driver, no_host=no_host,
                     force=force, error=error, refuse_eol_images=refuse_eol_images, packages=not no_packages)
    res = plan.resolution
    if json:
        written = write_plan(plan)
        output.emit_json({"detected": found.to_dict(), "host": res.host.describe() if res else None,
                          "assumed": plan.assumed, "stack": res.stack.to_dict() if res else None,
                          "written": [str(p) for p in written], "kept": plan.kept,
                          "error": str(plan.error) if plan.error else None,
                          "reasons": getattr(plan.error, "reasons", None)})
        raise typer.Exit(plan.error.exit_code if plan.error else 0)
    _print_plan(plan)
    if plan.error is None and interactive and not typer.confirm(f"Write {', '.join(plan.files)}?", default=True):
        print("nothing written")
        raise typer.Exit(1)
    written = write_plan(plan)
    con = output.console()
    con.print("wrote " + ", ".join(p.name for p in written) + (f"; kept your {', '.join(plan.kept)}" if plan.kept
                                                                 else ""))
    if plan.error is not None:
        con.print("[yellow]not locked:[/] the reasons are at the top of cudabox.yaml; edit it, then "
                  "[bold]cudabox lock[/]")
        raise plan.error
    if not found.requirements:
        con.print("no packages found: add them under `requirements:` in cudabox.yaml "
                  "(or rerun with --force --with torch), then [bold]cudabox lock[/]")
    con.print("next: [bold]cudabox build[/], then [bold]cudabox run -- python your_script.py[/]")


def _choose_variant(variants: list[str], default: str) -> str:
    for i, name in enumerate(variants, 1):
        print(f"  {i}. {name}")
    answer = typer.prompt("Which requirements file does the image need?", default=str(variants.index(default) + 1))
    return variants[int(answer) - 1] if answer.isdigit() and 0 < int(answer) <= len(variants) else answer


def _print_plan(plan) -> None:
    from rich.markup import escape as e

    from .resolving import print_stack

    con, found = output.console(), plan.detected
    con.print(f"[bold]Read[/] {e(', '.join(found.sources)) or 'no dependency files'}")
    for req in found.requirements:
        con.print(f"  {e(req)}  [dim]{e(found.origins[req])}[/]")
    for what, value, where in (("python", found.python, found.python_from), ("CUDA", found.cuda, found.cuda_from),
                               ("cuDNN", found.cudnn, found.cudnn_from)):
        if value:
            con.print(f"  {what} {e(value)}  [dim]{e(where)}[/]")
    if found.system_packages:
        con.print(f"  apt: {e(' '.join(found.system_packages))}")
    for step in found.run:
        con.print(f"  run: {e(step)}")
    for note in found.notes:
        con.print(f"  [yellow]note:[/] {e(note)}")
    for unused in found.unused:
        con.print(f"  [dim]not used:[/] {e(unused)}")
    if plan.error is not None:
        return  # the error and its reasons follow (and are at the top of the cudabox.yaml written)
    con.print(f"[bold]Host:[/] {e(plan.resolution.host.describe())}")
    for line in plan.assumed:
        con.print(f"  [yellow]assumed:[/] {e(line)}")
    print_stack(plan.resolution.stack, plan.resolution.others)


@app.command()
def doctor(json: bool = JSON, no_host: bool = NO_HOST, project: Path = PROJECT):
    """Check the engine, BuildKit, GPU runtime, driver and the project's lock; a fix for each problem."""
    from ..jobs.doctor import diagnose, report

    output.use_json(json)
    checks = diagnose(project, no_host=no_host)
    result = report(checks)
    if json:
        output.emit_json(result)
    else:
        marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}
        for c in checks:
            print(f"{marks[c.status]}  {c.name:12} {c.detail}")
            if c.fix:
                print(f"      {'':12} fix: {c.fix}")
    raise typer.Exit(0 if result["ok"] else 1)
