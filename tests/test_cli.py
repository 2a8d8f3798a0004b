"""The command line contract: exit codes, --json shapes, one-line errors (issues 2 and 3)."""

from __future__ import annotations

import json

from tests.support import run_cli


def test_version_and_help_are_fast_paths():
    assert run_cli("--version", check=0).stdout.startswith("cudabox ")
    out = run_cli("--help", check=0).stdout
    assert "resolve" in out and "matrix" in out


def test_unknown_option_is_one_line_exit_2():
    proc = run_cli("resolve", "--frobnicate")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--frobnicate" in proc.stderr


def test_matrix_show_json_and_table():
    data = json.loads(run_cli("matrix", "show", "gpus", "--json", check=0).stdout)
    assert any(g["name"] == "Tesla V100 SXM2 32 GB" and g["cc"] == "7.0" for g in data)
    table = run_cli("matrix", "show", "drivers", check=0).stdout
    assert "R565" in table and "12.7" in table


def test_matrix_gpu_names_toolkits_and_frameworks():
    data = json.loads(run_cli("matrix", "gpu", "NVIDIA GeForce RTX 5090", "--json", check=0).stdout)
    assert data["gpu"]["cc"] == "12.0"
    assert data["toolkits"][0]["cuda"] == "12.8"
    assert any(f["framework"] == "torch" and f["series"] == "2.7" and "cu128" in f["variants"]
               for f in data["frameworks"])
    assert not any(f["framework"] == "torch" and f["series"] == "2.6" for f in data["frameworks"])


def test_matrix_gpu_unknown_exit_2_with_suggestion():
    proc = run_cli("matrix", "gpu", "RTX 4909")
    assert proc.returncode == 2 and "RTX 4090" in proc.stderr


def test_matrix_check_passes():
    proc = run_cli("matrix", "check", "--json", check=0)
    assert json.loads(proc.stdout)["errors"] == []


def test_resolve_json_contract():
    proc = run_cli("resolve", "--with", "torch==2.7.*", "--gpu", "A100", "--python", "3.11", "--json", check=0)
    data = json.loads(proc.stdout)
    for key in ("python", "cuda", "cudnn", "packages", "base_image", "requirement", "why"):
        assert key in data
    assert data["python"] == "3.11" and data["packages"]["torch"].startswith("2.7.1")
    assert data["requirement"].startswith("cuda>=") and isinstance(data["why"], list)


def test_resolve_unsatisfiable_exit_3_json_reasons():
    proc = run_cli("resolve", "--with", "torch==2.3.*", "--with", "jax>=0.4.30", "--json")
    assert proc.returncode == 3
    data = json.loads(proc.stdout)
    assert data["error"] and any("cuDNN 8.9.2.26" in r for r in data["reasons"])


def test_resolve_bad_inputs_exit_2():
    for args, needle in [(["--gpu", "GTX 9999"], "unknown GPU"), (["--driver", "five-thirty"], "--driver"),
                         (["--python", "three"], "--python")]:
        proc = run_cli("resolve", "--with", "torch", *args)
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("resolve", "--with", "torch>=>2", "--json")
    assert proc.returncode == 2 and "invalid requirement" in json.loads(proc.stdout)["error"]


def test_lock_writes_and_check_detects_change(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('name: demo\npython: "3.11"\ncuda: "12.8"\n')
    run_cli("lock", cwd=tmp_path, check=0)
    lock = json.loads((tmp_path / "cudabox.lock").read_text())
    assert lock["lockfile"] == "cudabox.lock/v1" and lock["stack"]["cuda"] == "12.8"
    run_cli("lock", "--check", cwd=tmp_path, check=0)
    (tmp_path / "cudabox.yaml").write_text('name: demo\npython: "3.11"\ncuda: "12.6"\n')
    proc = run_cli("lock", "--check", cwd=tmp_path)
    assert proc.returncode == 1 and "changed" in proc.stderr


def test_spec_errors_name_file_and_line(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('name: demo\ncuda: "12.8"\ngpus: [A100]\nflavor: slim\n')
    proc = run_cli("resolve", cwd=tmp_path)
    assert proc.returncode == 2 and "cudabox.yaml:4: unknown key 'flavor'; did you mean 'flavour'?" in proc.stderr
    (tmp_path / "cudabox.yaml").write_text('name: demo\ncuda: "12.8"\nsystem_packages: ["git; rm -rf /"]\n')
    proc = run_cli("resolve", cwd=tmp_path)
    assert proc.returncode == 2 and "cudabox.yaml:3:" in proc.stderr


def test_failed_lock_leaves_no_file(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('name: demo\ncuda: "12.4"\ngpus: ["RTX 5090"]\n')
    proc = run_cli("lock", cwd=tmp_path)
    assert proc.returncode == 3 and not (tmp_path / "cudabox.lock").exists()
    assert list(tmp_path.iterdir()) == [tmp_path / "cudabox.yaml"]


def test_failing_check_exits_1():
    proc = run_cli("matrix", "check", "--strict")  # the bundled data has unverified records: warnings
    assert proc.returncode == 1 and "FAILED" in proc.stdout


def test_command_reference_is_current():
    """docs/commands.md is generated from the help texts: a new option must land in the reference."""
    import subprocess
    import sys

    from tests.support import REPO

    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_commands_doc.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_index_url_with_credentials_is_refused(tmp_path):
    (tmp_path / "cudabox.yaml").write_text('cuda: "12.8"\nindex_url: https://me:s3cret@pypi.example/simple\n')
    proc = run_cli("resolve", cwd=tmp_path)
    assert proc.returncode == 2 and "cudabox.yaml:2: index_url:" in proc.stderr
    assert "CUDABOX_PIP_INDEX_URL" in proc.stderr


def test_help_table_reads_as_the_commands_help():
    """`cudabox --help` is printed from cli/commands.py without typer: it must say exactly what typer would
    print from the commands themselves (same commands, order, texts, layout) at every width click uses."""
    import typer

    from cudabox.cli.commands import NAMES, root_help
    from cudabox.cli.root import app, load_all

    load_all()
    defined = [c.name or typer.main.get_command_name(c.callback.__name__) for c in app.registered_commands]
    assert sorted(defined + [g.name for g in app.registered_groups]) == sorted(NAMES)
    group = typer.main.get_command(app)
    for width in range(50, 79):  # click: the terminal's columns - 2, clamped to 50..78
        ctx = group.make_context("cudabox", [], resilient_parsing=True, terminal_width=width)
        assert root_help(width) == group.get_help(ctx) + "\n", f"at {width} columns"


def test_help_goes_through_the_table_and_a_command_loads_only_its_module():
    import subprocess
    import sys

    code = ("import sys, contextlib, io\nfrom cudabox.entry import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out: rc = main({args})\n"
            "print(rc, sorted(m for m in sys.modules if m == 'typer' or m.startswith('cudabox.cli.')), "
            "len(out.getvalue()))")
    top = subprocess.run([sys.executable, "-c", code.format(args="['--help']")], capture_output=True, text=True)
    rc, loaded = top.stdout.split(" ", 1)
    assert rc == "0" and "typer" not in loaded and "'cudabox.cli.commands'" in loaded, top.stdout + top.stderr
    one = subprocess.run([sys.executable, "-c", code.format(args="['resolve', '--help']")], capture_output=True,
                         text=True)
    assert one.stdout.startswith("0 ") and "'cudabox.cli.resolve'" in one.stdout, one.stdout + one.stderr
    assert not any(f"'cudabox.cli.{m}'" in one.stdout for m in ("run", "check", "build", "cluster", "matrix"))


def test_typo_suggests_a_command_that_is_not_loaded():
    proc = run_cli("valdate")
    assert proc.returncode == 2 and "No such command 'valdate'. Did you mean 'validate'?" in proc.stderr


def test_shell_completion_lists_commands_and_subcommands():
    env = {"_CUDABOX_COMPLETE": "complete_bash", "COMP_WORDS": "cudabox ex", "COMP_CWORD": "1"}
    assert run_cli(env=env, check=0).stdout.split() == ["exec", "export"]
    env.update(COMP_WORDS="cudabox matrix s", COMP_CWORD="2")
    assert run_cli(env=env, check=0).stdout.split() == ["show"]


def test_bare_cudabox_prints_the_help_on_stderr():
    proc = run_cli(check=0)
    assert proc.stdout == "" and proc.stderr.startswith("Usage: cudabox [OPTIONS] COMMAND") and "matrix" in proc.stderr


def test_matrix_data_in_brackets_is_printed_as_written(tmp_path):
    """rich reads `[word]` as markup and drops it: an overlay's GPU note with brackets (or any data printed
    through rich) must reach the terminal as written."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "gpus.yaml").write_text(
        "gpus:\n  - {name: 'Bracket GPU [b] [/x]', cc: '9.0', arch: Hopper, memory_gb: 80, class: datacenter,\n"
        "     status: unverified, note: 'see [vendor] sheet', source: 'test overlay'}\n")
    proc = run_cli("matrix", "gpu", "Bracket GPU [b] [/x]", env={"CUDABOX_MATRICES": str(overlay)})
    assert proc.returncode == 0, proc.stderr
    assert "Bracket GPU [b] [/x]" in proc.stdout and "see [vendor] sheet" in proc.stdout
