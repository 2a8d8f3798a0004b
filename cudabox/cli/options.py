"""Options several commands share, declared once (the help text is the command reference's); those that
`cudabox resolve` takes are declared as data in cli/flags.py."""

from __future__ import annotations

import typer

from . import flags


def option(flag: flags.Flag):
    """The typer option for a flag declared in cli/flags.py."""
    return typer.Option(None if flag.many else flag.default, *flag.names, metavar=flag.metavar, help=flag.help)


JSON = option(flags.JSON)
PROJECT = option(flags.PROJECT)
NO_HOST = option(flags.NO_HOST)
COMMAND = typer.Argument(None, metavar="-- CMD...", help="The command to run in the project's image.")
IMAGE = typer.Option(None, "--image", metavar="REF", help="Run this image instead of the project's.")
REGISTRY = typer.Option(None, "--registry", metavar="HOST/PATH", envvar="CUDABOX_REGISTRY",
                        help="Registry prefix the nodes pull from (--transport registry; k8s image prefix).")

# Slurm flags, shared by `export slurm` and `run --on slurm` (each has an environment default).
PARTITION = typer.Option(None, "--partition", metavar="P", envvar="CUDABOX_SLURM_PARTITION",
                         help="Slurm partition (default: the cluster's).")
TIME = typer.Option(None, "--time", metavar="T", envvar="CUDABOX_SLURM_TIME",
                    help="Time limit: minutes, HH:MM:SS or D-HH:MM:SS.")
NODES = typer.Option(1, "--nodes", min=1, metavar="N", help="Nodes; the command runs once per node.")
TRANSPORT = typer.Option("local", "--transport", metavar="local|shared|registry", envvar="CUDABOX_SLURM_TRANSPORT",
                         help="How the image reaches the nodes: local (already in the node's engine: single "
                              "node), shared (docker save to --shared-dir), registry (pull from --registry).")
