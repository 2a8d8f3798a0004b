"""The command table: every top-level command's name, place in `cudabox --help`, module and one-line help.

Why a table: typer builds a command only from its module, and importing every module (and typer, ~40 ms)
to list them made `cudabox --help` 5x `python -c pass`. With the table, `cudabox --help` is printed here
with the standard library only, and `cudabox CMD` imports just CMD's modules (root.LazyGroup).
tests/test_cli.py keeps the table equal to the commands themselves (names, order, help, formatting).
"""

from __future__ import annotations

ROOT_HELP = "One isolated, validated CUDA stack per project, in a container."
EPILOG = ("Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 unsatisfiable request, 4 passed without a GPU "
          "(validate), 5 missing engine or runtime. Reference: docs/.")
OPTIONS = (("--version", "Print the version and exit."),
           ("--install-completion", "Install completion for the current shell."),
           ("--show-completion", "Show completion for the current shell, to copy it or customize the installation."),
           ("-h, --help", "Show this message and exit."))

# (name, the cli modules that define it and its subcommands, in registration order, the first paragraph of
# its help). The order is `cudabox --help`'s: the daily path first, then operations, then the groups.
COMMANDS = (
    ("init", ("run",), "Detect what the project needs, resolve, and write cudabox.yaml, cudabox.lock and "
                       ".dockerignore."),
    ("resolve", ("resolve",), "Pick the stack for a project and say why (exit 3 with the reasons when none "
                              "exists)."),
    ("lock", ("resolve",), "Resolve ./cudabox.yaml, pin and hash every package, and write cudabox.lock "
                           "atomically."),
    ("dockerfile", ("images",), "Render the project's Dockerfile from cudabox.lock (stdout by default)."),
    ("build", ("build",), "Build the project's image from cudabox.lock (stack image shared, reused when present), "
                          "then validate it."),
    ("validate", ("build",), "Run the image's smoke test in a container (with the GPUs when the engine has an "
                             "NVIDIA runtime)."),
    ("run", ("run",), "Run CMD in the project's stack (locks and builds first when needed); exits with CMD's exit "
                      "code. With --on slurm|k8s it runs on the cluster instead (--gpus is then a count per node)."),
    ("shell", ("run",), "An interactive shell (bash, else sh) in the project's stack; the container goes when it "
                        "exits."),
    ("exec", ("run",), "Run CMD inside a running job (as the job's user); exits with CMD's exit code."),
    ("ps", ("run",), "List cudabox jobs (containers with the io.cudabox.run label)."),
    ("logs", ("run",), "Print a job's output (stdout to stdout, stderr to stderr)."),
    ("stop", ("run",), "Stop jobs (SIGTERM, then SIGKILL) and remove their containers."),
    ("doctor", ("run",), "Check the engine, BuildKit, GPU runtime, driver and the project's lock; a fix for each "
                         "problem."),
    ("check", ("check",), "Is this GPU node healthy? The smoke test on the host itself: driver, GPUs, CUDA "
                          "libraries, kernels, bandwidth and GEMM against the datasheet. Exit 0 passed, 1 failed, "
                          "4 passed without a GPU."),
    ("jobs", ("cluster",), "List your cudabox Slurm jobs (pending, running, and recently ended) with their state "
                           "and exit code."),
    ("images", ("images", "build"), "The curated image catalog in images/ (from matrices/catalog.yaml)."),
    ("ci", ("ci",), "Build and validate the image catalog in CI: a GitHub Actions matrix, a docker-bake.json, "
                    "`ci build`, and .github/workflows/images.yml (docs/ci.md)."),
    ("export", ("cluster", "check", "export_dev"), "Write what runs the project elsewhere: on a cluster (an sbatch "
                                                   "script, a Kubernetes Job; nothing is submitted), in an editor "
                                                   "(devcontainer), in Compose."),
    ("fleet", ("cluster",), "Plan stacks for a fleet of GPU nodes (docs/fleet.md)."),
    ("matrix", ("matrix", "refresh"), "Show and check the compatibility matrix (matrices/ + overlays)."),
)
NAMES = tuple(name for name, _, _ in COMMANDS)
MODULES = {name: modules for name, modules, _ in COMMANDS}


def short_help(text: str, limit: int) -> str:
    """A command's line in a listing: its first sentence, else as many words as fit and "..." (click's rule,
    so that the listing reads the same whoever prints it)."""
    words = text.split()
    total = 0
    for i, word in enumerate(words):
        total += len(word) + (i > 0)
        if total > limit:
            break
        if word[-1] == ".":
            return " ".join(words[: i + 1])
        if total == limit and i != len(words) - 1:
            break
    else:
        return " ".join(words)
    total += len("...")
    while i > 0:
        total -= len(words[i]) + (i > 0)
        if total <= limit:
            break
        i -= 1
    return " ".join(words[:i]) + "..."


def root_help(width: int | None = None) -> str:
    """`cudabox --help`, laid out as click lays out a group's help (usage, text, options, commands, epilog)."""
    if width is None:
        import shutil

        width = max(min(shutil.get_terminal_size().columns, 80) - 2, 50)
    out = [_wrap("[OPTIONS] COMMAND [ARGS]...", width, "Usage: cudabox ", " " * len("Usage: cudabox ")), "",
           _wrap(ROOT_HELP, width, "  ", "  "), "", "Options:"]
    out += _definitions(OPTIONS, width)
    limit = width - 6 - max(len(name) for name in NAMES)
    out += ["", "Commands:"] + _definitions([(name, short_help(text, limit)) for name, _, text in COMMANDS], width)
    out += ["", _wrap(EPILOG, width, "  ", "  ")]
    return "\n".join(out) + "\n"


def _definitions(rows, width: int, indent: int = 2) -> list[str]:
    """click's definition list: the first column up to 30 wide, the text wrapped beside it."""
    first = min(max(len(a) for a, _ in rows), 30) + 2
    lines = []
    for term, text in rows:
        wrapped = _wrap(text, max(width - first - 2, 10), "", "").splitlines()
        if len(term) <= first - 2:
            lines.append(" " * indent + term + " " * (first - len(term)) + wrapped[0])
        else:
            lines += [" " * indent + term, " " * (first + indent) + wrapped[0]]
        lines += [" " * (first + indent) + line for line in wrapped[1:]]
    return lines


def _wrap(text: str, width: int, first: str, rest: str) -> str:
    import textwrap

    return textwrap.fill(text, width, initial_indent=first, subsequent_indent=rest, replace_whitespace=False,
                         break_on_hyphens=True)
