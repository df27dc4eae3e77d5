"""Outputs a client placed in CUDA shared memory can be written there by the backend itself, on
the GPU (`RequestedOutput.placement`, `Tensor.written_on_device`), and the server then copies
nothing into the region: on any machine, with the host-memory stand-in for the CUDA runtime and
a backend of the test's that "writes on the device" with the stand-in's copies. Decoding
(HTTP and gRPC) records where each output goes, it crosses to the model home and back without
the output's bytes, the response cache stores no stand-in, and an output said to be written
elsewhere than asked is an error, never silence. tests/gpu/test_device_inputs_gpu.py proves the
PyTorch backend's writing on a GPU."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os

import numpy as np
import pytest
from host_memory_runtime import HostMemoryRuntime, registry_with_region

from naiad import Server, ServerOptions
from naiad.backend import Backend, InferenceResponse, Model, ModelInstance, Tensor, hookimpl
from naiad.cache.response_cache import CacheSpec
from naiad.cuda_shared_memory import CudaSharedMemoryRegistry
from naiad.device_placement import CudaPlacement
from naiad.errors import ErrorCode, NaiadError
from naiad.frontends.grpc import codec as grpc_codec
from naiad.frontends.http import codec as http_codec
from naiad.inference import InferenceRequest, RequestedOutput
from naiad.observability.request_trace import RequestTrace
from naiad.observability.trace_settings import TraceSetting
from naiad.protos import grpc_service_pb2 as pb
from naiad.shared_memory import SharedMemoryRegistry
from naiad.workers.request_messages import pack_request, pack_response, unpack_request, unpack_response
from naiad_wire.interprocess.messages import FrameReader, unpack_message
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd

HANDLE = b"o" * 64
GPU = 1  # the device the stand-in's region is registered on


@pytest.fixture
def device() -> HostMemoryRuntime:
    return HostMemoryRuntime()


@pytest.fixture
def registry(device: HostMemoryRuntime) -> SharedMemoryRegistry:
    return registry_with_region(device, HANDLE, 128, GPU)


def shm(offset: int, size: int) -> dict:
    return {"shared_memory_region": "gpu", "shared_memory_offset": offset, "shared_memory_byte_size": size}


def region(device: HostMemoryRuntime) -> np.ndarray:
    return device.allocations[HANDLE]


# -- a backend that writes its outputs "on the device" ------------------------------------------


class DoublingInstance(ModelInstance):
    """OUT = IN * 2; where the request placed OUT on a GPU, written there through the
    placement's address (the stand-in's memory), as a GPU backend would copy it."""

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        self.model.executions += 1
        responses = []
        for request in requests:
            out = (request.input("IN").data * 2).astype(np.float32)
            placement = next((o.placement for o in request.outputs if o.name == "OUT"), None)
            if placement is None:
                responses.append(InferenceResponse(outputs=[Tensor.from_numpy("OUT", out)]))
                continue
            with placement.borrowed() as address:
                assert address is not None
                ctypes.memmove(address, out.ctypes.data, out.nbytes)
            responses.append(InferenceResponse(outputs=[Tensor.written_on_device("OUT", "FP32", out.shape, placement)]))
        return responses


class DoublingModel(Model):
    executions = 0

    def create_instance(self, context):
        return DoublingInstance(self, context)


class DoublingBackend(Backend):
    name = "doubling"
    abi_version = (2, 4)

    def create_model(self, context):
        return DoublingModel(context)


class DoublingPlugin:
    @hookimpl
    def naiad_backends(self):
        return [DoublingBackend]


CONFIG = """backend: "doubling" max_batch_size: 0
input [{ name: "IN" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [4] }]
response_cache { enable: true }"""


def test_an_output_written_on_the_device_reaches_the_region_once_and_is_never_cached(tmp_path, registry, device):
    (tmp_path / "double" / "1").mkdir(parents=True)
    (tmp_path / "double" / "config.pbtxt").write_text(CONFIG)
    x = [1.0, 2.5, -3.0, 4.0]
    body = json.dumps(
        {
            "inputs": [{"name": "IN", "datatype": "FP32", "shape": [4], "data": x}],
            "outputs": [{"name": "OUT", "parameters": shm(64, 16)}],
        }
    ).encode()

    async def go() -> None:
        options = ServerOptions(
            [str(tmp_path)], backend_plugins=[DoublingPlugin()], cache=CacheSpec("local", {"size": "65536"})
        )
        async with Server(options) as server:
            for _ in range(2):
                region(device)[:] = 0
                request, _ = http_codec.decode_infer_request(body, None, "double", "", registry)
                assert request.outputs[0].placement == CudaPlacement("gpu", 64, 16, GPU)
                response = await server.infer(request)
                [out] = response.outputs
                assert not out.on_host and out.shape == (4,)
                encoded = http_codec.encode_infer_response(response, request.outputs, False, registry)
                # Described, not carried; and the backend's bytes are the ones in the region.
                assert json.loads(encoded.body)["outputs"] == [{"name": "OUT", "datatype": "FP32", "shape": [4]}]
                np.testing.assert_array_equal(region(device)[64:80].view(np.float32), np.array(x, np.float32) * 2)
                assert region(device)[:64].sum() == 0 and region(device)[80:].sum() == 0
            # The stand-in has no bytes to store: the second request ran the model too.
            model = server.models.known("double").serving[1].model  # type: ignore[union-attr]
            assert model.executions == 2

    asyncio.run(go())


def test_grpc_decoding_records_where_a_cuda_output_goes_and_the_encoder_copies_nothing(registry, device):
    message = pb.ModelInferRequest(model_name="m")
    message.inputs.add(name="IN", datatype="FP32", shape=[4])
    message.raw_input_contents.append(np.zeros(4, np.float32).tobytes())
    placed = message.outputs.add(name="OUT")
    placed.parameters["shared_memory_region"].string_param = "gpu"
    placed.parameters["shared_memory_offset"].int64_param = 32
    placed.parameters["shared_memory_byte_size"].int64_param = 16
    message.outputs.add(name="HOST")
    request = grpc_codec.decode_infer_request(message, registry)
    out, host = request.outputs
    assert out.placement == CudaPlacement("gpu", 32, 16, GPU) and out.placement.regions is registry.cuda
    assert host.placement is None

    region(device)[:] = 7
    written = Tensor.written_on_device("OUT", "FP32", (4,), out.placement)
    encoded = grpc_codec.encode_infer_response(InferenceResponse(outputs=[written]), request, registry)
    assert list(encoded.raw_output_contents) == [b""]
    assert (region(device) == 7).all()  # the stand-in's zeros were not copied over the backend's bytes


def test_an_output_written_elsewhere_than_asked_is_an_internal_error(registry):
    request = InferenceRequest(
        "m", [], outputs=[RequestedOutput("OUT", shm(32, 16), registry.placement("gpu", 32, 16))]
    )
    elsewhere = Tensor.written_on_device("OUT", "FP32", (4,), CudaPlacement("gpu", 0, 16, GPU))
    with pytest.raises(NaiadError) as failed:
        http_codec.encode_infer_response(InferenceResponse(outputs=[elsewhere]), request.outputs, False, registry)
    assert failed.value.code == ErrorCode.INTERNAL
    assert (
        "output 'OUT' was written to region 'gpu' at offset 0, not where the request placed it" in failed.value.message
    )


def test_only_an_output_placed_inside_a_cuda_region_gets_a_placement(registry):
    assert registry.placement("gpu", 112, 16) == CudaPlacement("gpu", 112, 16, GPU)
    assert registry.placement("gpu", 120, 16) is None  # past the end: the write refuses it
    assert registry.placement("elsewhere", 0, 16) is None  # not a CUDA region


def test_placements_cross_to_the_model_home_and_a_written_output_comes_back_without_its_bytes(registry):
    home = CudaSharedMemoryRegistry()
    fd = create_ring_fd(1 << 20)
    try:
        writer, reader = RingWriter(fd), RingReader(fd)
        frames = FrameReader()

        def cross(frame: bytes) -> dict:
            (body,) = frames.feed(frame)
            return unpack_message(body)

        asked = InferenceRequest(
            "m", [], outputs=[RequestedOutput("OUT", shm(0, 4096), registry.placement("gpu", 0, 128))]
        )
        with writer.lock:
            message = cross(pack_request(3, asked, False, writer))
        [output] = unpack_request(message, reader, home).outputs
        assert output.placement == CudaPlacement("gpu", 0, 128, GPU) and output.placement.regions is home
        assert output.parameters == shm(0, 4096)

        big = Tensor.written_on_device("OUT", "FP32", (8, 1024), output.placement)
        with writer.lock:
            frame = pack_response(3, InferenceResponse(outputs=[big]), writer)
        assert len(frame) < 1024  # 32 KB of stand-in did not travel
        back = unpack_response(cross(frame), reader).outputs[0]
        assert not back.on_host and back.shape == (8, 1024) and back.placement == output.placement
    finally:
        os.close(fd)


def test_a_trace_of_tensors_shows_no_values_for_an_output_written_on_the_device():
    exported = []
    trace = RequestTrace(exported.append, 1, "m", "1", "", TraceSetting(level=("TIMESTAMPS", "TENSORS")))
    written = Tensor.written_on_device("OUT", "FP32", (2,), CudaPlacement("gpu", 0, 8, GPU))
    trace.request_done(InferenceResponse(outputs=[written, Tensor.from_numpy("HOST", np.array([1.5], np.float32))]))
    assert [(t["name"], t["data"]) for t in trace.tensors] == [("OUT", None), ("HOST", [1.5])]
