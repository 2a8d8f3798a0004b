"""How cudabox is started: `python -m cudabox`, shell completion, one version (issue 15)."""

from __future__ import annotations

import os
import subprocess
import sys

import cudabox
from tests.support import CUDABOX


def test_python_dash_m_runs_the_cli(tmp_path):
    version = subprocess.run([sys.executable, "-m", "cudabox", "--version"], capture_output=True, text=True,
                             cwd=tmp_path, timeout=60)
    assert version.returncode == 0 and version.stdout == f"cudabox {cudabox.__version__}\n"
    bad = subprocess.run([sys.executable, "-m", "cudabox", "no-such-command"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert bad.returncode == 2 and "no-such-command" in bad.stderr and "Traceback" not in bad.stderr


def test_version_comes_from_the_package():
    import importlib.metadata

    assert importlib.metadata.version("cudabox") == cudabox.__version__


def _complete(words: str, cword: int) -> list[str]:
    env = dict(os.environ, COMP_WORDS=words, COMP_CWORD=str(cword), _CUDABOX_COMPLETE="complete_bash")
    proc = subprocess.run([str(CUDABOX)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_shell_completion_completes_commands_and_subcommands():
    assert _complete("cudabox exp", 1) == ["export"]
    assert {"ls", "check", "generate"} <= set(_complete("cudabox images ", 2))
    script = subprocess.run([str(CUDABOX), "--show-completion", "bash"], capture_output=True, text=True, timeout=60)
    assert script.returncode == 0 and "_CUDABOX_COMPLETE=complete_bash" in script.stdout
