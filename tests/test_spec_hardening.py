"""Hostile projects, case by case: paths that leave the project, unbounded files, bad bytes, credentials in
error lines, names that collide. Each refusal is exit 2 with one `file:line: what to do` line (issue #16)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudabox.cli import main
from cudabox.errors import InputError, one_line, redact
from cudabox.project.spec import RESERVED_DIRS, default_name, load_spec

LOCKABLE = 'cuda: "12.8"\n'


def cli(capsys, *args) -> tuple[int, str]:
    rc = main([str(a) for a in args])
    captured = capsys.readouterr()
    return rc, captured.err


def project(tmp_path: Path, yaml_text: str, files: dict | None = None) -> Path:
    directory = tmp_path / "proj"
    directory.mkdir(exist_ok=True)
    (directory / "cudabox.yaml").write_text(yaml_text)
    for name, body in (files or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    return directory


def refused(capsys, directory: Path, *needles: str, line: int | None = None) -> str:
    rc, err = cli(capsys, "lock", "-C", directory)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    if line is not None:
        assert f"cudabox.yaml:{line}:" in err, err
    assert not (directory / "cudabox.lock").exists()
    return err


# --------------------------------------------------------------------------- paths stay inside the project


@pytest.mark.parametrize("value", ["../outside.txt", "/etc/passwd", "link-out", "/dev/zero", "sub/../../outside.txt"])
def test_requirements_file_outside_the_project_is_refused(tmp_path, capsys, value):
    (tmp_path / "outside.txt").write_text("numpy\n")
    directory = project(tmp_path, f"{LOCKABLE}\nrequirements_file: {value}\n", {"sub/x": ""})
    (directory / "link-out").symlink_to(tmp_path / "outside.txt")
    refused(capsys, directory, "requirements_file", "outside the project folder", line=3)


def test_requirements_includes_outside_the_project_are_refused(tmp_path, capsys):
    (tmp_path / "outside.txt").write_text("numpy\n")
    directory = project(tmp_path, f"{LOCKABLE}requirements_file: r.txt\n",
                        {"r.txt": "numpy\n-r sub/ok.txt\n", "sub/ok.txt": "-r ../../outside.txt\n"})
    err = refused(capsys, directory, "ok.txt:1:", "outside the project folder")
    assert "numpy" not in err
    (directory / "sub" / "ok.txt").write_text("-r ../r.txt\nrich\n")  # inside, and a cycle: fine
    rc, err = cli(capsys, "lock", "-C", directory)
    assert rc == 0, err


def test_ca_cert_in_cudabox_yaml_stays_inside_the_project(tmp_path, capsys):
    directory = project(tmp_path, f"{LOCKABLE}ca_cert: /etc/ssl/certs/ca-certificates.crt\n")
    refused(capsys, directory, "ca_cert", "outside the project folder", "--ca-cert", line=2)
    (directory / "cudabox.yaml").write_text(f"{LOCKABLE}ca_cert: certs/corp.pem\n")
    assert load_spec(directory).ca_cert == "certs/corp.pem"


# --------------------------------------------------------------------------- bounded reads, bad bytes, odd files


def test_a_huge_requirements_file_is_refused_without_reading_it_all(tmp_path, capsys):
    directory = project(tmp_path, f"{LOCKABLE}requirements_file: big.txt\n")
    with open(directory / "big.txt", "wb") as fh:
        fh.truncate(64 << 30)  # 64 GiB, sparse: reading it whole would be an OOM kill
    refused(capsys, directory, "big.txt", "larger than 1 MiB")


def test_non_utf8_inputs_name_the_line(tmp_path, capsys):
    directory = project(tmp_path, f"{LOCKABLE}requirements_file: r.txt\n", {"r.txt": b"numpy\nr\xe9quests\n"})
    refused(capsys, directory, "r.txt:2:", "not valid UTF-8")
    (directory / "cudabox.yaml").write_bytes(b'cuda: "12.8"\nname: "caf\xe9"\n')
    refused(capsys, directory, "cudabox.yaml:2:", "not valid UTF-8")


@pytest.mark.parametrize("kind", ["directory", "loop", "device"])
def test_cudabox_yaml_that_is_no_file(tmp_path, capsys, kind):
    directory = tmp_path / "proj"
    directory.mkdir()
    target = directory / "cudabox.yaml"
    if kind == "directory":
        target.mkdir()
    elif kind == "loop":
        target.symlink_to(target)
    else:
        target.symlink_to("/dev/zero")
    rc, err = cli(capsys, "resolve", "-C", directory)
    assert rc == 2 and "cudabox.yaml" in err and len(err.strip().splitlines()) == 1, err


def test_lock_that_is_a_directory_or_not_utf8(tmp_path, capsys):
    directory = project(tmp_path, LOCKABLE)
    (directory / "cudabox.lock").mkdir()
    for command in ("lock", "dockerfile"):
        rc, err = cli(capsys, command, "-C", directory)
        assert rc == 2 and "cudabox.lock" in err, err
    (directory / "cudabox.lock").rmdir()
    (directory / "cudabox.lock").write_bytes(b'{"lockfile": "\xff"}')
    rc, err = cli(capsys, "dockerfile", "-C", directory)
    assert rc == 2 and "cudabox.lock:1: not valid UTF-8" in err, err


def test_a_non_utf8_file_name_in_the_project(tmp_path, capsys):
    directory = project(tmp_path, LOCKABLE)
    (directory / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    rc, err = cli(capsys, "lock", "-C", directory)
    assert rc == 0, err
    rc, err = cli(capsys, "dockerfile", "-C", directory)
    assert rc == 0, err


# --------------------------------------------------------------------------- types and exact matches


@pytest.mark.parametrize("text, key", [
    ("system_packages: true\n", "system_packages"), ("run: {a: b}\n", "run"), ("gpus: {a: 1}\n", "gpus"),
    ("python: [3.11]\n", "python"), ("env: [A]\n", "env"), ("requirements: true\n", "requirements"),
    ("name: !!binary aGk=\n", "name"), ("env: {A: [1]}\n", "env"),
])
def test_wrong_types_anywhere(tmp_path, capsys, text, key):
    refused(capsys, project(tmp_path, LOCKABLE + text), key, line=2)


@pytest.mark.parametrize("text, needle", [
    ('name: "abc\\n"\n', "name"), ('workdir: "/work\\n"\n', "workdir"), ('system_packages: ["git\\n"]\n', "git"),
    ('env: {A: "x\\u001b[31my"}\n', "control characters"), ("workdir: /usr/local/app\n", "workdir"),
    ("workdir: /cache/pip\n", "workdir"), ("workdir: /\n", "workdir"), ("env: {PATH: /x}\n", "PATH"),
])
def test_lock_refuses_what_build_would_refuse(tmp_path, capsys, text, needle):
    refused(capsys, project(tmp_path, LOCKABLE + text), needle, line=2)


def test_every_cache_mount_point_is_a_reserved_workdir():
    from cudabox.jobs.run import CACHES

    for _, _, mount in CACHES:
        assert any(mount == d or mount.startswith(d + "/") for d in RESERVED_DIRS), mount


@pytest.mark.parametrize("folder, name", [("My Project!", "my-project"), ("...", "project"),
                                          ("x" * 80 + "-y", "x" * 63), ("Ünïcode_Ok", "n-code_ok")])
def test_a_folder_name_gives_a_valid_default_name(tmp_path, folder, name):
    directory = tmp_path / folder
    directory.mkdir()
    (directory / "cudabox.yaml").write_text(LOCKABLE)
    assert default_name(directory) == name
    assert load_spec(directory).name == name


# --------------------------------------------------------------------------- credentials never echoed


def test_credentials_are_never_echoed(tmp_path, capsys):
    directory = project(tmp_path, f"{LOCKABLE}requirements_file: r.txt\n",
                        {"r.txt": "numpy\nfoo @@ https://alice:hunter2@corp.example/simple?token=s3cret\n"})
    err = refused(capsys, directory, "r.txt:2:", "https://***@corp.example")
    assert "hunter2" not in err and "s3cret" not in err and "alice" not in err


@pytest.mark.parametrize("url", ["https://corp.example/simple?token=s3cret", "https://u:s3cret@corp.example/s",
                                 "https://corp.example/s?private_token=s3cret&x=1"])
def test_index_urls_with_tokens_are_refused_in_cudabox_yaml(tmp_path, capsys, url):
    err = refused(capsys, project(tmp_path, f"{LOCKABLE}index_url: '{url}'\n"), "CUDABOX_PIP_INDEX_URL", line=2)
    assert "s3cret" not in err


def test_redaction_and_one_line():
    assert redact("see https://a:b@h/x and http://h/?api_key=zz&q=1") == "see https://***@h/x and http://h/?api_key=***&q=1"
    assert one_line("a\nb\x1b[0m") == "a\\nb\\x1b[0m"
    assert "s3cret" not in str(InputError("bad https://x/?token=s3cret"))


# --------------------------------------------------------------------------- image names per project folder


def test_two_checkouts_with_the_same_name_get_different_images(tmp_path, capsys):
    from cudabox.image.build import project_tag
    from cudabox.lock.lockfile import read_lock

    tags = []
    for checkout in ("a/app", "b/app"):
        directory = tmp_path / checkout
        directory.mkdir(parents=True)
        (directory / "cudabox.yaml").write_text(LOCKABLE)  # no name: both fall back to "app"
        rc, err = cli(capsys, "lock", "-C", directory)
        assert rc == 0, err
        tags.append(project_tag(read_lock(directory), project_dir=directory))
    assert read_lock(tmp_path / "a/app").hash == read_lock(tmp_path / "b/app").hash  # same content...
    assert tags[0] != tags[1] and all(t.startswith("cudabox/app:") for t in tags)  # ...different images
    assert project_tag(read_lock(tmp_path / "a/app"), project_dir=tmp_path / "a" / "." / "app") == tags[0]
