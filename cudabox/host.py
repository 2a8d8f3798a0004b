"""What the host has: the NVIDIA driver version and the GPUs, or nothing.

Sources, in order: CUDABOX_DRIVER_VERSION / CUDABOX_GPUS (explicit, also for
planning on a machine without GPUs), the kernel module (/sys/module/nvidia/version,
/proc/driver/nvidia/version), NVML (nvidia-ml-py, optional), nvidia-smi.
CUDABOX_NO_HOST=1 (or --no-host) ignores the host entirely.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class HostGPU:
    name: str
    cc: str | None = None
    uuid: str | None = None
    memory_mib: int | None = None


@dataclass(frozen=True)
class Host:
    driver: str | None = None
    gpus: tuple[HostGPU, ...] = ()
    source: str = "none"  # where the facts came from
    ignored: bool = False  # --no-host
    notes: tuple[str, ...] = field(default=())

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    def describe(self) -> str:
        if self.ignored:
            return "host ignored (--no-host)"
        if not self.driver and not self.gpus:
            return "no NVIDIA driver or GPU found on this host"
        gpus = ", ".join(g.name for g in self.gpus) or "no GPUs"
        return f"driver {self.driver or 'unknown'}, {gpus} (from {self.source})"


_DRIVER_IN_TEXT = re.compile(r"\b(\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def _driver_from_kernel() -> tuple[str | None, str]:
    text = _read("/sys/module/nvidia/version")
    if text and text.strip():
        return text.strip(), "/sys/module/nvidia/version"
    text = _read("/proc/driver/nvidia/version")
    if text:
        m = re.search(r"Kernel Module(?: for [^ ]+)?\s+(\d{3}\.\d+(?:\.\d+)?)", text) or _DRIVER_IN_TEXT.search(text)
        if m:
            return m.group(1), "/proc/driver/nvidia/version"
    return None, ""


def _from_nvml() -> tuple[str | None, list[HostGPU]] | None:
    try:
        import pynvml  # nvidia-ml-py, optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: NVML raises its own error types
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024)
            gpus.append(HostGPU(name=name.decode() if isinstance(name, bytes) else name, cc=f"{major}.{minor}",
                                uuid=uuid.decode() if isinstance(uuid, bytes) else uuid, memory_mib=mem))
        return driver, gpus
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _on_path(name: str) -> str | None:
    """shutil.which for a plain name: importing shutil (bz2, lzma...) costs more than a command's probe."""
    for folder in os.get_exec_path():
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _from_nvidia_smi() -> tuple[str | None, list[HostGPU]] | None:
    import subprocess  # here: `resolve --no-host` does not pay for it

    exe = _on_path("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version,name,compute_cap,uuid,memory.total",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=15, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    driver, gpus = None, []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        driver = parts[0]
        mem = int(parts[4]) if parts[4].isdigit() else None
        gpus.append(HostGPU(name=parts[1], cc=parts[2] or None, uuid=parts[3] or None, memory_mib=mem))
    return driver, gpus


def detect(*, ignore: bool = False) -> Host:
    """Detect the host's driver and GPUs. Never raises: a host without NVIDIA is a valid answer."""
    if ignore or os.environ.get("CUDABOX_NO_HOST") not in (None, "", "0"):
        return Host(ignored=True, source="ignored")
    env_driver = os.environ.get("CUDABOX_DRIVER_VERSION")
    env_gpus = os.environ.get("CUDABOX_GPUS")
    if env_driver or env_gpus:
        gpus = tuple(HostGPU(name=n.strip()) for n in (env_gpus or "").split(",") if n.strip())
        return Host(driver=env_driver or None, gpus=gpus, source="environment (CUDABOX_DRIVER_VERSION/CUDABOX_GPUS)")
    driver, source = _driver_from_kernel()
    for probe, name in ((_from_nvml, "NVML"), (_from_nvidia_smi, "nvidia-smi")):
        found = probe()
        if found is not None:
            nvml_driver, gpus = found
            return Host(driver=driver or nvml_driver, gpus=tuple(gpus), source=source or name)
    return Host(driver=driver, source=source or "none")
