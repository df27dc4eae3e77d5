"""CPU gauges from /proc, and the GPU families built from NVML readings. No GPU is
needed: a stand-in `pynvml` module answers the NVML calls the sampler makes."""

import types

from naiad.frontends.metrics.exposition import render
from naiad.frontends.metrics.system_gauges import SystemGauges


def fake_nvml(energy_mj):
    memory = types.SimpleNamespace(total=80 * 2**30, used=2**30)

    def energy(handle):
        return energy_mj[0]

    def no_power(handle):
        raise RuntimeError("not supported on this device")

    return types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}".encode() if h == 0 else f"GPU-{h}",
        nvmlDeviceGetMemoryInfo=lambda h: memory,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=37),
        nvmlDeviceGetPowerUsage=lambda h: 125_500 if h == 0 else no_power(h),
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetTotalEnergyConsumption=energy,
    )


def test_gpu_families_from_nvml(monkeypatch):
    energy = [5_000_000]
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_nvml(energy))
    gauges = SystemGauges(allow_cpu=False, allow_gpu=True)
    gauges.start_gpu()
    gauges.sample()
    energy[0] += 2_500  # 2.5 J later
    gauges.sample()
    text = render(gauges.families()).decode()
    assert 'nv_gpu_utilization{gpu_uuid="GPU-0"} 0.37' in text
    assert 'nv_gpu_memory_total_bytes{gpu_uuid="GPU-1"} 85899345920' in text
    assert 'nv_gpu_memory_used_bytes{gpu_uuid="GPU-0"} 1073741824' in text
    assert 'nv_gpu_power_usage{gpu_uuid="GPU-0"} 125.5' in text
    assert 'nv_gpu_power_usage{gpu_uuid="GPU-1"}' not in text  # unsupported reading: no sample
    assert 'nv_gpu_power_limit{gpu_uuid="GPU-1"} 700.0' in text
    assert 'nv_energy_consumption{gpu_uuid="GPU-0"} 2.5' in text
    assert "nv_cpu_utilization" not in text


def test_no_nvml_means_no_gpu_families(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import fails
    gauges = SystemGauges(allow_cpu=True, allow_gpu=True)
    gauges.start_gpu()
    gauges.sample()
    gauges.sample()
    names = [f.name for f in gauges.families()]
    assert names == ["nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes"]
    assert gauges.memory_total > gauges.memory_used > 0 and 0.0 <= gauges.cpu_utilization <= 1.0
