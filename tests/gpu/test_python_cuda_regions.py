"""A model.py running in its own process reads inputs a client placed in CUDA shared memory as
GPU tensors, in place (with FORCE_CPU_ONLY_INPUT_TENSORS "no"), and writes the GPU outputs it
makes into the regions the client placed them in, device to device: the model's process opens
the regions from their CUDA IPC handles (lent_regions.py, device_memory.py). On any machine,
with a stand-in for CUDA that two processes share (shared_host_memory.py): the model's process
is real, the server in this test's process. test_python_backend_gpu.py proves it on a GPU."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
from naiad_backend_python.model_side import device_memory
from naiad_backend_python.model_side.device_memory import OpenRegions
from naiad_backend_python.model_side.pb_utils import InferenceResponse, Tensor, TritonModelException
from naiad_backend_python.model_side.stub_codec import write_placed_outputs
from naiad_backend_python.model_side.stub_messages import RequestItem
from shared_host_memory import FakeGpuArray, SharedHostMemory, handle_of

from naiad import Server, ServerOptions
from naiad.cuda_shared_memory import CudaSharedMemoryRegistry
from naiad.frontends.http import codec as http_codec
from naiad.shared_memory import SharedMemoryRegistry

MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils
from naiad_backend_python.model_side import device_memory
from shared_host_memory import FakeGpuArray, SharedHostMemory


class TritonPythonModel:
    def initialize(self, args):
        self.device = device_memory._runtime = SharedHostMemory()

    def execute(self, requests):
        # What this process had open, and had opened in all, as execute began.
        regions = [self.device.open_count, self.device.opens]
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN")
            if x.is_cpu():
                values = x.as_numpy()
            else:
                values = FakeGpuArray.read(x)
                try:
                    x.as_numpy()
                except pb_utils.TritonModelException:
                    pass
                else:
                    raise AssertionError("as_numpy read a GPU tensor")
            out = pb_utils.Tensor.from_dlpack("OUT", FakeGpuArray(values * 2))
            facts = np.array([x.is_cpu(), out.is_cpu(), *regions], np.int32)
            responses.append(pb_utils.InferenceResponse([out, pb_utils.Tensor("FACTS", facts)]))
        return responses
"""

CONFIG = """backend: "python" max_batch_size: 0
input [{ name: "IN" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [4] }, { name: "FACTS" data_type: TYPE_INT32 dims: [4] }]
parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "%s" } }
"""

X = np.array([1.0, 2.5, -3.0, 4.0], np.float32)


@pytest.fixture
def device():
    device = SharedHostMemory()
    yield device
    device.free()


def write_repository(root: Path) -> None:
    for name, force_cpu in (("on_gpu", "no"), ("on_host", "yes")):
        version = root / name / "1"
        version.mkdir(parents=True)
        (version / "model.py").write_text(MODEL_PY)
        shutil.copy(Path(__file__).with_name("shared_host_memory.py"), version)
        (root / name / "config.pbtxt").write_text(CONFIG % force_cpu)


def body(region: str, out_placed: bool) -> bytes:
    shm = {"shared_memory_region": region, "shared_memory_byte_size": 16}
    request = {
        "inputs": [{"name": "IN", "datatype": "FP32", "shape": [4], "parameters": {**shm, "shared_memory_offset": 0}}],
        "outputs": [{"name": "FACTS"}, {"name": "OUT", "parameters": {**shm, "shared_memory_offset": 64}}],
    }
    if not out_placed:
        request["outputs"] = [{"name": "FACTS"}, {"name": "OUT"}]
    return json.dumps(request).encode()


def client_region(device: SharedHostMemory, registry: SharedMemoryRegistry, name: str) -> np.ndarray:
    """A client's region of 128 bytes holding X at offset 0, registered as `name`."""
    segment = f"naiad-test-{uuid.uuid4().hex[:12]}"
    region = device.allocate(segment, 128)
    region[:16] = np.frombuffer(X.tobytes(), np.uint8)
    registry.register_cuda(name, handle_of(segment), 0, 128)
    return region


def test_a_model_py_reads_and_writes_cuda_shared_memory_in_its_own_process(tmp_path, device, caplog):
    caplog.set_level(logging.INFO, "naiad.backends.python")
    write_repository(tmp_path)
    registry = SharedMemoryRegistry(allow_client=True, cuda=CudaSharedMemoryRegistry(lambda: device))  # type: ignore[arg-type, return-value]
    region = client_region(device, registry, "gpu")

    async def infer(server: Server, model: str, name: str = "gpu", out_placed: bool = True):
        request, _ = http_codec.decode_infer_request(body(name, out_placed), None, model, "", registry)
        response = await server.infer(request)
        outputs = {t.name: t for t in response.outputs}
        encoded = json.loads(http_codec.encode_infer_response(response, request.outputs, False, registry).body)
        return outputs["FACTS"].data.tolist(), outputs, {o["name"]: o for o in encoded["outputs"]}

    async def go() -> None:
        async with Server(ServerOptions([str(tmp_path)])) as server:
            for _ in range(2):
                region[16:] = 0
                facts, outputs, encoded = await infer(server, "on_gpu")
                # The input reached the model as a GPU tensor (as_numpy refused it); the output it
                # made on the "GPU" was written into the region by the model's process, and the
                # server carried no bytes of it. The model's process opened the region once, for
                # the first request, and kept it open for the second.
                assert facts == [0, 0, 1, 1]
                assert not outputs["OUT"].on_host and "data" not in encoded["OUT"]
                np.testing.assert_array_equal(region[64:80].view(np.float32), X * 2)
                assert not region[16:64].any() and not region[80:].any()

            # FORCE_CPU_ONLY_INPUT_TENSORS "yes": the input in host memory (no region open as
            # execute began); the output is still the model process's to write on the GPU.
            region[16:] = 0
            facts, outputs, _ = await infer(server, "on_host")
            assert facts == [1, 0, 0, 0] and not outputs["OUT"].on_host
            np.testing.assert_array_equal(region[64:80].view(np.float32), X * 2)

            # An output the client wants in the response: the GPU tensor comes through the host.
            region[16:] = 0
            facts, outputs, encoded = await infer(server, "on_gpu", out_placed=False)
            assert outputs["OUT"].on_host and encoded["OUT"]["data"] == (X * 2).tolist()
            assert not region[64:80].any()

            # Unregistering a region closes it in the model's process too: with another region
            # registered, a request finds only that one open there.
            registry.unregister_cuda("gpu")
            other = client_region(device, registry, "gpu2")
            facts, _, _ = await infer(server, "on_gpu", "gpu2")
            assert facts == [0, 0, 1, 2]
            np.testing.assert_array_equal(other[64:80].view(np.float32), X * 2)
            registry.unregister_cuda("gpu2")

    asyncio.run(go())
    assert "outputs placed in CUDA shared memory are written there by the model's process" in caplog.text
    assert device.open_count == 0


# -- pb_utils.Tensor on a GPU, as model.py sees it ---------------------------------------------


def test_from_dlpack_keeps_a_gpu_tensor_on_the_gpu_as_triton_does():
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    gpu = FakeGpuArray(values)
    tensor = Tensor.from_dlpack("OUT", gpu)
    assert not tensor.is_cpu() and tensor.shape() == (2, 3) and tensor.datatype() == "FP32"
    assert tensor.__dlpack_device__() == (2, 0)
    assert tensor.__cuda_array_interface__["data"][0] == gpu.array.ctypes.data  # no copy
    with pytest.raises(TritonModelException, match="tensor 'OUT' is stored in GPU memory"):
        tensor.as_numpy()
    np.testing.assert_array_equal(tensor._host(), values)
    # A host tensor has no CUDA interface: torch and CuPy do not mistake it for device memory.
    assert not hasattr(Tensor("IN", values), "__cuda_array_interface__")


def test_a_gpu_tensor_whose_memory_is_not_contiguous_is_copied_to_the_host():
    class Strided(FakeGpuArray):
        @property
        def __cuda_array_interface__(self):
            return {**super().__cuda_array_interface__, "strides": (4, 8)}

    tensor = Tensor.from_dlpack("OUT", Strided(np.zeros((2, 3), np.float32)))
    assert tensor.is_cpu() and tensor.as_numpy().shape == (2, 3)


def test_only_gpu_outputs_that_fit_their_region_are_written_there(device):
    segment = f"naiad-test-{uuid.uuid4().hex[:12]}"
    region, handle = device.allocate(segment, 64), handle_of(segment)
    previous, device_memory._runtime = device_memory._runtime, device
    try:
        fits = Tensor.from_dlpack("A", FakeGpuArray(np.full(4, 7, np.float32)))
        too_big = Tensor.from_dlpack("B", FakeGpuArray(np.ones(8, np.float32)))
        on_host = Tensor("C", np.ones(2, np.float32))
        placed = {"A": (handle, 0, 16, 16), "B": (handle, 0, 32, 16), "C": (handle, 0, 48, 16)}
        item = RequestItem(1, "", 0, 0, 0, {}, ["A", "B", "C"], [], placed)
        regions = OpenRegions()
        [written] = write_placed_outputs([item], [InferenceResponse([fits, too_big, on_host])], regions)
        assert device.open_count == 1  # opened once for the three outputs, and kept
        regions.forget([handle])
    finally:
        device_memory._runtime = previous
    # B needs 32 bytes where the client gave 16: the host path says so; C was never on a GPU.
    assert written == {"A"}
    assert region[16:32].view(np.float32).tolist() == [7.0] * 4 and not region[32:].any()
    assert device.synchronized == 1 and device.open_count == 0
