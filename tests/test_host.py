"""Host detection and how host facts feed the resolution (issue 3)."""

from __future__ import annotations

import json

from cudabox import host
from cudabox.lock.resolution import resolve_project
from cudabox.project.spec import spec_from_flags
from tests.support import run_cli


def test_no_host_flag_and_env_ignore_the_host(monkeypatch):
    monkeypatch.setenv("CUDABOX_DRIVER_VERSION", "535.104.05")
    assert host.detect(ignore=True).ignored
    monkeypatch.setenv("CUDABOX_NO_HOST", "1")
    assert host.detect().ignored


def test_environment_describes_a_host(monkeypatch):
    monkeypatch.delenv("CUDABOX_NO_HOST")
    monkeypatch.setenv("CUDABOX_DRIVER_VERSION", "470.82.01")
    monkeypatch.setenv("CUDABOX_GPUS", "Tesla V100-SXM2-32GB, NVIDIA A100-SXM4-80GB")
    h = host.detect()
    assert h.driver == "470.82.01" and [g.name for g in h.gpus] == ["Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB"]


def test_this_machine_has_no_nvidia_driver(monkeypatch):
    monkeypatch.delenv("CUDABOX_NO_HOST")
    h = host.detect()
    assert not h.gpus and not h.ignored


def test_nvidia_smi_on_the_path_describes_the_gpus(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDABOX_NO_HOST")
    skipped, found = tmp_path / "a", tmp_path / "b"
    skipped.mkdir()
    found.mkdir()
    (skipped / "nvidia-smi").write_text("#!/bin/sh\nexit 1\n")  # not executable: passed over, as `which` does
    smi = found / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '550.54.15, NVIDIA H100 80GB HBM3, 9.0, GPU-1234, 81559'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{skipped}:{found}:/usr/bin:/bin")
    monkeypatch.setattr(host, "_from_nvml", lambda: None)  # whatever this machine has installed
    h = host.detect()
    assert h.source in ("nvidia-smi", "/sys/module/nvidia/version", "/proc/driver/nvidia/version")
    assert [(g.name, g.cc, g.memory_mib) for g in h.gpus] == [("NVIDIA H100 80GB HBM3", "9.0", 81559)]
    monkeypatch.setenv("PATH", str(skipped))
    assert host.detect().gpus == ()


def test_host_driver_and_gpus_constrain_the_stack(monkeypatch, tmp_path, matrix):
    monkeypatch.delenv("CUDABOX_NO_HOST")
    monkeypatch.setenv("CUDABOX_DRIVER_VERSION", "470.82.01")
    monkeypatch.setenv("CUDABOX_GPUS", "Tesla V100-SXM2-32GB")
    res = resolve_project(spec_from_flags(tmp_path, ["torch==2.4.*"]), matrix=matrix)
    torch = next(f for f in res.stack.frameworks if f.name == "torch")
    assert torch.variant == "cu118" and res.stack.driver_mode == "minor-compat"
    assert any("host: driver 470.82.01" in w for w in res.stack.why)


def test_explicit_values_win_over_the_host(monkeypatch, tmp_path, matrix):
    monkeypatch.delenv("CUDABOX_NO_HOST")
    monkeypatch.setenv("CUDABOX_DRIVER_VERSION", "470.82.01")
    spec = spec_from_flags(tmp_path, ["torch==2.4.*"], driver="550.54.14", gpus=("H100",))
    res = resolve_project(spec, matrix=matrix)
    assert res.request.driver.text == "550.54.14" and res.request.gpus[0].cc == "9.0"


def test_no_gpu_host_says_what_it_assumed(monkeypatch):
    monkeypatch.delenv("CUDABOX_NO_HOST")
    data = json.loads(run_cli("resolve", "--with", "torch", "--json", check=0,
                              env={"CUDABOX_NO_HOST": ""}).stdout)
    assert any("no NVIDIA driver or GPU on this host" in w for w in data["why"])
