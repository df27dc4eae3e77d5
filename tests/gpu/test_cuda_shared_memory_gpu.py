"""CUDA shared memory on a real GPU, as Triton's users run it: tritonclient's
`cuda_shared_memory` utilities allocate device memory in this (the client's) process, the
server opens the regions' IPC handles, reads the inputs from them and writes the outputs into
them, over HTTP and gRPC; with --workers 2 every process holds the regions."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from gpu_machine import NEEDS_GPU
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

pytestmark = NEEDS_GPU

# Triton's simple model's shapes, with the numpy test backend (tests/numpy_backend.py).
ADD_SUB = """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[16]},{name:"INPUT1" data_type: TYPE_INT32 dims:[16]}]
output [{name:"OUTPUT0" data_type: TYPE_INT32 dims:[16]},{name:"OUTPUT1" data_type: TYPE_INT32 dims:[16]}]
parameters {key:"op" value {string_value:"add_sub"}}"""
BYTES = 16 * 4


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def server(request, tmp_path_factory):
    repo = tmp_path_factory.mktemp("cudashm")
    (repo / "simple" / "1").mkdir(parents=True)
    (repo / "simple" / "config.pbtxt").write_text(ADD_SUB)
    tests = Path(__file__).resolve().parents[1]
    pythonpath = os.pathsep.join(filter(None, [str(tests), os.environ.get("PYTHONPATH")]))
    process = ServerProcess(
        repo,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-client-shm=true",
        env={"PYTHONPATH": pythonpath},
        workers=request.param,
    )
    with process.start():
        yield process


@pytest.fixture
def regions(server):
    import tritonclient.utils.cuda_shared_memory as cudashm

    handles = {
        "input_data": cudashm.create_shared_memory_region("input_data", 2 * BYTES, 0),
        "output_data": cudashm.create_shared_memory_region("output_data", 2 * BYTES, 0),
    }
    yield cudashm, handles
    # Whatever a test left registered goes before the next test, and before the memory is freed.
    httpclient.InferenceServerClient(server.http_url).unregister_cuda_shared_memory()
    for handle in handles.values():
        cudashm.destroy_shared_memory_region(handle)


def region_status(client, protocol: str) -> list[dict]:
    """Each region's status as a dict. gRPC's JSON leaves out fields at their default (proto3):
    device 0 has no "device_id" there, so it is filled in."""
    if protocol == "http":
        return client.get_cuda_shared_memory_status()
    regions = client.get_cuda_shared_memory_status(as_json=True).get("regions", {}).values()
    return [{"device_id": 0, **region} for region in regions]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_inputs_and_outputs_in_cuda_shared_memory(server, regions, protocol):
    cudashm, handles = regions
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    client.unregister_cuda_shared_memory()
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    cudashm.set_shared_memory_region(handles["input_data"], [a, b])
    for name, handle in handles.items():
        client.register_cuda_shared_memory(name, cudashm.get_raw_handle(handle), 0, 2 * BYTES)
    listed = region_status(client, protocol)
    assert sorted((r["name"], int(r["device_id"]), int(r["byte_size"])) for r in listed) == [
        ("input_data", 0, 2 * BYTES),
        ("output_data", 0, 2 * BYTES),
    ]
    # Several requests: with two workers they reach both processes.
    for _ in range(4):
        inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory("input_data", BYTES)
        inputs[1].set_shared_memory("input_data", BYTES, offset=BYTES)
        outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory("output_data", BYTES)
        outputs[1].set_shared_memory("output_data", BYTES, offset=BYTES)
        result = client.infer("simple", inputs, outputs=outputs)
        # The answer is in the regions, not in the body.
        if protocol == "http":
            assert result.get_output("OUTPUT0") == {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]}
        else:
            assert result.get_response().raw_output_contents == [b"", b""]
        both = cudashm.get_contents_as_numpy(handles["output_data"], np.int32, [2, 16])
        assert both[0].tolist() == (a + b)[0].tolist()
        assert both[1].tolist() == (a - b)[0].tolist()
        cudashm.set_shared_memory_region(handles["output_data"], [np.zeros((2, 16), np.int32)])
    client.unregister_cuda_shared_memory("input_data")
    assert [r["name"] for r in region_status(client, protocol)] == ["output_data"]
    client.unregister_cuda_shared_memory()
    assert region_status(client, protocol) == []


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_region_larger_than_the_allocation_is_refused(server, regions, protocol):
    cudashm, handles = regions
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    with pytest.raises(InferenceServerException) as info:
        client.register_cuda_shared_memory("too_big", cudashm.get_raw_handle(handles["input_data"]), 0, 1 << 30)
    assert info.value.message().startswith("failed to register shared memory region 'too_big': invalid args")
    assert info.value.status() == ("400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_name_registered_twice_is_refused(server, regions, protocol):
    cudashm, handles = regions
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    raw = cudashm.get_raw_handle(handles["input_data"])
    client.register_cuda_shared_memory("twice", raw, 0, BYTES)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.register_cuda_shared_memory("twice", raw, 0, BYTES)
        assert "shared memory region 'twice' already in manager" in info.value.message()
        assert [r["name"] for r in region_status(client, protocol)] == ["twice"]
    finally:
        client.unregister_cuda_shared_memory()


def test_a_handle_of_the_wrong_size_is_refused_over_http(server):
    body = json.dumps({"raw_handle": {"b64": base64.b64encode(b"\0" * 32).decode()}, "device_id": 0, "byte_size": 64})
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/cudasharedmemory/region/short/register", data=body.encode(), method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    assert info.value.code == 400
    error = json.loads(info.value.read())["error"]
    assert error.startswith("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
