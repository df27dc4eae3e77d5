"""CPU and GPU gauges, sampled every `--metrics-interval-ms` off the event loop.

CPU figures come from /proc (Linux), with psutil as the fallback elsewhere; GPU figures
from NVML through the optional `pynvml` module (package nvidia-ml-py). Without NVML or
without a GPU the GPU families are simply absent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exposition import Family

__all__ = ["SystemGauges"]

log = logging.getLogger("naiad.metrics")


@dataclass
class GpuReading:
    uuid: str
    utilization: float
    memory_total: int
    memory_used: int
    power_usage_w: float | None
    power_limit_w: float | None
    energy_j: float | None


@dataclass
class SystemGauges:
    allow_cpu: bool = True
    allow_gpu: bool = True
    cpu_utilization: float = 0.0
    memory_total: int = 0
    memory_used: int = 0
    gpus: list[GpuReading] = field(default_factory=list)
    _last_cpu: tuple[int, int] | None = None
    _nvml: Any = None
    _energy_start: dict[str, float] = field(default_factory=dict)

    def start_gpu(self) -> None:
        """Initialise NVML if it is installed and sees a GPU; otherwise GPU metrics stay off."""
        if not self.allow_gpu:
            return
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() == 0:
                pynvml.nvmlShutdown()
                return
            self._nvml = pynvml
        except Exception as exc:  # noqa: BLE001 - no NVML, no driver, or no GPU: no GPU metrics
            log.debug("GPU metrics unavailable: %s", exc)
            self._nvml = None

    def stop(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
            self._nvml = None

    def sample(self) -> None:
        """Read every gauge once (blocking; run it in a thread)."""
        if self.allow_cpu:
            self._sample_cpu()
        if self._nvml is not None:
            self._sample_gpus()

    async def run(self, interval_s: float) -> None:
        while True:
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(interval_s)

    def families(self) -> list[Family]:
        out: list[Family] = []
        if self.allow_cpu:
            util = Family("nv_cpu_utilization", "CPU utilization, a ratio from 0.0 to 1.0", "gauge")
            util.add(self.cpu_utilization)
            total = Family("nv_cpu_memory_total_bytes", "Total memory of the host (RAM), bytes", "gauge")
            total.add(self.memory_total)
            used = Family("nv_cpu_memory_used_bytes", "Memory of the host in use (RAM), bytes", "gauge")
            used.add(self.memory_used)
            out += [util, total, used]
        if self.gpus:
            specs = [
                ("nv_gpu_utilization", "GPU utilization, a ratio from 0.0 to 1.0", "utilization"),
                ("nv_gpu_memory_total_bytes", "Total memory of the GPU, bytes", "memory_total"),
                ("nv_gpu_memory_used_bytes", "Memory of the GPU in use, bytes", "memory_used"),
                ("nv_gpu_power_usage", "Power the GPU draws now, watts", "power_usage_w"),
                ("nv_gpu_power_limit", "Power limit of the GPU, watts", "power_limit_w"),
                ("nv_energy_consumption", "Energy the GPU used since the server started, joules", "energy_j"),
            ]
            for name, text, attribute in specs:
                family = Family(name, text, "gauge")
                for gpu in self.gpus:
                    value = getattr(gpu, attribute)
                    if value is not None:
                        family.add(value, (("gpu_uuid", gpu.uuid),))
                if family.samples:
                    out.append(family)
        return out

    # -- readers -------------------------------------------------------------------------

    def _sample_cpu(self) -> None:
        stat, meminfo = Path("/proc/stat"), Path("/proc/meminfo")
        if stat.exists() and meminfo.exists():
            fields = stat.read_text().split("\n", 1)[0].split()[1:]
            numbers = [int(x) for x in fields[:8]]
            idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)  # idle + iowait
            total = sum(numbers)
            if self._last_cpu is not None:
                d_total, d_idle = total - self._last_cpu[0], idle - self._last_cpu[1]
                self.cpu_utilization = (d_total - d_idle) / d_total if d_total > 0 else 0.0
            self._last_cpu = (total, idle)
            info = {}
            for line in meminfo.read_text().splitlines():
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024 if rest.split() else 0
            self.memory_total = info.get("MemTotal", 0)
            self.memory_used = self.memory_total - info.get("MemAvailable", info.get("MemFree", 0))
            return
        try:
            import psutil  # type: ignore[import-untyped]
        except ImportError:
            return
        self.cpu_utilization = psutil.cpu_percent(interval=None) / 100.0
        memory = psutil.virtual_memory()
        self.memory_total, self.memory_used = int(memory.total), int(memory.total - memory.available)

    def _sample_gpus(self) -> None:
        nvml = self._nvml
        readings = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            readings.append(
                GpuReading(
                    uuid=uuid,
                    utilization=_optional(lambda handle=handle: nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0)
                    or 0.0,
                    memory_total=int(memory.total),
                    memory_used=int(memory.used),
                    power_usage_w=_optional(lambda handle=handle: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
                    power_limit_w=_optional(
                        lambda handle=handle: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
                    ),
                    energy_j=self._energy(
                        uuid, _optional(lambda handle=handle: nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
                    ),
                )
            )
        self.gpus = readings

    def _energy(self, uuid: str, millijoules: float | None) -> float | None:
        if millijoules is None:
            return None
        start = self._energy_start.setdefault(uuid, millijoules)
        return (millijoules - start) / 1000.0


def _optional(read: Any) -> Any:
    """An NVML reading some GPUs do not support (power on MIG slices...): None then."""
    try:
        return read()
    except Exception:  # noqa: BLE001
        return None
