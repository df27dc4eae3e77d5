"""KIND_GPU on a real GPU: a PyTorch model's instances run on the GPUs their group lists and
receive their inputs there; `count` instances per listed GPU, loaded once per server however
many workers serve it; NVML's gauges under Triton's names."""

import re
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from gpu_machine import NEEDS_GPU

from naiad.testing import ServerProcess

pytestmark = NEEDS_GPU
# No `from __future__ import annotations` here: TorchScript reads the annotations of Where.
torch = pytest.importorskip("torch")


class Where(torch.nn.Module):
    """Doubles its input and says which CUDA device the input arrived on (-1: the CPU)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        device = x.get_device() if x.is_cuda else -1
        return x * 2, torch.full((x.shape[0], 1), device, dtype=torch.int32, device=x.device)


CONFIG = """name: "where"
platform: "pytorch_libtorch"
max_batch_size: 8
input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 1 ] }]
instance_group [{ kind: KIND_GPU gpus: [ 0 ] count: 2 }]
dynamic_batching { }
"""


def write_where(repo: Path, config: str = CONFIG) -> Path:
    (repo / "where" / "1").mkdir(parents=True)
    torch.jit.script(Where()).save(str(repo / "where" / "1" / "model.pt"))  # type: ignore[no-untyped-call]
    (repo / "where" / "config.pbtxt").write_text(config)
    return repo


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_where(tmp_path_factory.mktemp("kind_gpu"))
    with ServerProcess(repo, "--metrics-interval-ms", "200", workers=2).start() as process:
        yield process


@pytest.mark.parametrize("module", [httpclient, grpcclient])
def test_inputs_arrive_on_the_instances_gpu(server, module):
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = module.InferInput("INPUT__0", [3, 4], "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("where", [tensor])
    assert result.as_numpy("OUTPUT__0").tolist() == (x * 2).tolist()
    assert result.as_numpy("OUTPUT__1").tolist() == [[0], [0], [0]]


def test_the_model_is_loaded_once_in_the_model_home_whatever_the_workers(server):
    # Only the model home holds a CUDA context: front doors never load a model.
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        on_gpu = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
    finally:
        pynvml.nvmlShutdown()
    workers = set(server.worker_pids())
    assert on_gpu & workers == {server.model_home_pid()}, (on_gpu, workers, server.model_home_pid())


def test_the_config_keeps_its_gpu_group(server):
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("where")
    groups = [(g["name"], g["kind"], g["count"], g["gpus"]) for g in config["instance_group"]]
    assert groups == [("where_0", "KIND_GPU", 2, [0])]


def test_a_gpu_the_machine_lacks_fails_the_load_in_tritons_words(tmp_path):
    missing = torch.cuda.device_count()
    repo = write_where(tmp_path, CONFIG.replace("gpus: [ 0 ]", f"gpus: [ {missing} ]"))
    process = ServerProcess(repo, "--model-control-mode", "explicit")
    with process.start():
        client = httpclient.InferenceServerClient(process.http_url)
        with pytest.raises(Exception) as info:
            client.load_model("where")
        assert f"instance group where_0 of model where specifies invalid or unsupported gpu id {missing}" in str(
            info.value
        )


def test_nvml_gauges_under_tritons_names(server):
    time.sleep(0.5)  # a sample or two at --metrics-interval-ms 200
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    for family in (
        "nv_gpu_utilization",
        "nv_gpu_memory_total_bytes",
        "nv_gpu_memory_used_bytes",
        "nv_gpu_power_usage",
        "nv_gpu_power_limit",
        "nv_energy_consumption",
    ):
        samples = re.findall(rf'^{family}\{{gpu_uuid="(GPU-[0-9a-f-]+)"\}} ([0-9.e+-]+)$', text, re.M)
        assert samples, f"{family} missing:\n{text}"
    total = float(re.search(r"^nv_gpu_memory_total_bytes\{[^}]*\} (\S+)$", text, re.M).group(1))
    used = float(re.search(r"^nv_gpu_memory_used_bytes\{[^}]*\} (\S+)$", text, re.M).group(1))
    assert 0 < used < total


def test_gpu_metrics_can_be_turned_off(tmp_path):
    repo = write_where(tmp_path)
    with ServerProcess(repo, "--allow-gpu-metrics", "false", "--metrics-interval-ms", "200").start() as process:
        text = urllib.request.urlopen(process.metrics_url, timeout=10).read().decode()
    assert "nv_gpu_" not in text and "nv_energy_consumption" not in text
    assert "nv_cpu_utilization" in text
