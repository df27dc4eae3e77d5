"""Inputs a client placed in CUDA shared memory keep where they sit on the GPU (`Tensor.placement`),
so a backend on that GPU reads them there: on any machine, with the host-memory stand-in for the
CUDA runtime. Decoding (HTTP and gRPC) records the placement, it crosses to the model home as
plain values, the PyTorch backend takes an input from the GPU only when every request of the
batch placed it on the instance's own GPU, and a region being read is closed only once it is
given back. tests/gpu/test_device_inputs_gpu.py proves the reading itself on a GPU."""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import ExitStack

import numpy as np
import pytest
from host_memory_runtime import HostMemoryRuntime, registry_with_region

from naiad import cuda_shared_memory
from naiad.cuda_shared_memory import CudaSharedMemoryRegistry
from naiad.device_placement import CudaPlacement
from naiad.errors import ErrorCode, NaiadError
from naiad.frontends.grpc import codec as grpc_codec
from naiad.frontends.http import codec as http_codec
from naiad.inference import InferenceRequest
from naiad.protos import grpc_service_pb2 as pb
from naiad.shared_memory import SharedMemoryRegistry
from naiad.tensor import Tensor
from naiad.workers.request_messages import pack_request, unpack_request
from naiad_wire.interprocess.messages import FrameReader, unpack_message
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd

HANDLE = b"p" * 64
GPU = 1  # the device the stand-in's region is registered on


@pytest.fixture
def device() -> HostMemoryRuntime:
    return HostMemoryRuntime()


@pytest.fixture
def registry(device: HostMemoryRuntime) -> SharedMemoryRegistry:
    registry = registry_with_region(device, HANDLE, 128, GPU)
    memory = device.allocations[HANDLE]
    memory[:64] = np.arange(16, dtype=np.float32).view(np.uint8)
    memory[64:] = np.arange(16, 32, dtype=np.float32).view(np.uint8)
    return registry


def shm(offset: int, size: int) -> dict:
    return {"shared_memory_region": "gpu", "shared_memory_offset": offset, "shared_memory_byte_size": size}


def test_http_decoding_keeps_where_a_cuda_input_sits(registry):
    body = json.dumps(
        {
            "inputs": [
                {"name": "X", "datatype": "FP32", "shape": [1, 16], "parameters": shm(64, 64)},
                {"name": "Y", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0]},
            ]
        }
    ).encode()
    request, _ = http_codec.decode_infer_request(body, None, "m", "", registry)
    placed, inline = request.inputs
    assert placed.data.tolist() == [list(range(16, 32))]  # the host copy, which stays the truth
    assert placed.placement == CudaPlacement("gpu", 64, 64, GPU)
    assert placed.placement.regions is registry.cuda
    assert inline.placement is None


def test_grpc_decoding_keeps_where_a_cuda_input_sits(registry):
    message = pb.ModelInferRequest(model_name="m")
    tensor = message.inputs.add(name="X", datatype="FP32", shape=[1, 16])
    tensor.parameters["shared_memory_region"].string_param = "gpu"
    tensor.parameters["shared_memory_byte_size"].int64_param = 64
    request = grpc_codec.decode_infer_request(message, registry)
    (placed,) = request.inputs
    assert placed.data.tolist() == [list(range(16))]
    assert placed.placement == CudaPlacement("gpu", 0, 64, GPU)
    assert "shared_memory_region" not in placed.parameters


def test_bytes_in_a_cuda_region_are_parsed_on_the_host_only(registry, device):
    # A BYTES tensor's wire form (length-prefixed strings) is not what a model reads.
    device.allocations[HANDLE][:8] = np.frombuffer(b"\x04\x00\x00\x00abcd", np.uint8)[:8]
    body = json.dumps({"inputs": [{"name": "S", "datatype": "BYTES", "shape": [1], "parameters": shm(0, 8)}]}).encode()
    request, _ = http_codec.decode_infer_request(body, None, "m", "", registry)
    assert request.inputs[0].data.tolist() == [b"abcd"] and request.inputs[0].placement is None


def test_a_placement_crosses_to_the_model_home_bound_to_its_regions(registry):
    home = CudaSharedMemoryRegistry()
    fd = create_ring_fd(1 << 20)
    try:
        writer, reader = RingWriter(fd), RingReader(fd)
        data = np.arange(16, dtype=np.float32).reshape(1, 16)
        sent = InferenceRequest("m", [Tensor("X", "FP32", (1, 16), data, {}, registry.placement("gpu", 0, 64, "FP32"))])
        with writer.lock:
            frame = pack_request(7, sent, False, writer)
        (body,) = FrameReader().feed(frame)
        message = unpack_message(body)
        arrived = unpack_request(message, reader, home).inputs[0]
        assert arrived.data.tolist() == data.tolist()
        assert arrived.placement == CudaPlacement("gpu", 0, 64, GPU)
        assert arrived.placement.regions is home
        reader.consumed(message.get("mark"))
    finally:
        os.close(fd)


def test_a_region_being_read_is_closed_only_once_given_back(registry, device):
    placement = registry.placement("gpu", 64, 64, "FP32")
    assert placement is not None
    unregistered = threading.Event()

    def unregister() -> None:
        registry.unregister_cuda("gpu")
        unregistered.set()

    with placement.borrowed() as pointer:
        assert pointer == device.allocations[HANDLE].ctypes.data + 64
        thread = threading.Thread(target=unregister)
        thread.start()
        time.sleep(0.3)
        assert not unregistered.is_set() and device.opened  # waiting, the handle still open
    thread.join(5)
    assert unregistered.is_set() and device.opened == []
    with placement.borrowed() as pointer:
        assert pointer is None  # gone: the reader falls back to the host copy


def test_unregistering_a_region_read_for_too_long_is_refused(registry, monkeypatch):
    monkeypatch.setattr(cuda_shared_memory, "UNREGISTER_WAIT_S", 0.2)
    placement = registry.placement("gpu", 0, 64, "FP32")
    assert placement is not None
    with placement.borrowed():
        with pytest.raises(NaiadError) as refused:
            registry.unregister_cuda("gpu")
    assert refused.value.code == ErrorCode.UNAVAILABLE
    assert refused.value.message == (
        "failed to unregister CUDA shared memory region 'gpu': an inference is still reading it"
    )
    assert registry.cuda_status("gpu")[0]["name"] == "gpu"


def test_the_pytorch_backend_reads_an_input_on_its_gpu_only_when_every_request_placed_it_there(
    registry, device, monkeypatch
):
    torch = pytest.importorskip("torch")
    from naiad_backend_pytorch.device_inputs import placed_inputs

    base = device.allocations[HANDLE].ctypes.data

    def request(offset: int, datatype: str = "FP32", placed: bool = True) -> InferenceRequest:
        dtype = np.float32 if datatype == "FP32" else np.uint32
        data = np.zeros((1, 16), dtype)
        placement = registry.placement("gpu", offset, 64, datatype) if placed else None
        return InferenceRequest("m", [Tensor("X", datatype, (1, 16), data, {}, placement)])

    on_gpu = torch.device("cuda", GPU)
    with ExitStack() as held:
        found = placed_inputs([request(0), request(64)], ["X"], on_gpu, held)
        assert [pointer for pointer, _ in found["X"]] == [base, base + 64]
        monkeypatch.setattr(cuda_shared_memory, "UNREGISTER_WAIT_S", 0.1)
        with pytest.raises(NaiadError):  # held until the batch is done
            registry.unregister_cuda("gpu")
    with ExitStack() as held:
        assert placed_inputs([request(0), request(64, placed=False)], ["X"], on_gpu, held) == {}
        assert placed_inputs([request(0)], ["X"], torch.device("cuda", 0), held) == {}  # another GPU
        assert placed_inputs([request(0, "UINT32")], ["X"], on_gpu, held) == {}  # torch gathers no uint32
    registry.unregister_cuda("gpu")  # nothing holds it now
    assert device.opened == []
