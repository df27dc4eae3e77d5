"""The CUDA shared-memory registry's rules, on any machine: a stand-in for the CUDA runtime
keeps each client "allocation" in host memory (ctypes copies where CUDA would copy), so the
registry's own logic is tested here; tests/gpu/test_cuda_shared_memory_gpu.py proves the same through
tritonclient on a real GPU."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from host_memory_runtime import HostMemoryRuntime

from naiad.cuda_runtime import CudaUnavailable
from naiad.cuda_shared_memory import CudaSharedMemoryRegistry
from naiad.errors import ErrorCode, NaiadError
from naiad.shared_memory import SharedMemoryRegistry

HANDLE = b"h" * 64


@pytest.fixture
def device() -> HostMemoryRuntime:
    return HostMemoryRuntime()


@pytest.fixture
def registry(device: HostMemoryRuntime) -> SharedMemoryRegistry:
    return SharedMemoryRegistry(allow_client=True, cuda=CudaSharedMemoryRegistry(lambda: device))  # type: ignore[arg-type, return-value]


def refused(call, code: ErrorCode) -> str:
    with pytest.raises(NaiadError) as info:
        call()
    assert info.value.code == code, info.value
    return info.value.message


def test_inputs_are_read_and_outputs_written_through_the_runtime(registry, device):
    memory = device.allocate(HANDLE, 64)
    memory[16:32] = np.arange(16, dtype=np.uint8)
    registry.register_cuda("gpu", HANDLE, 0, 64)
    assert registry.cuda_status() == [{"name": "gpu", "device_id": 0, "byte_size": 64}]
    assert registry.cuda_status("gpu") == [{"name": "gpu", "device_id": 0, "byte_size": 64}]
    assert bytes(registry.read("gpu", 16, 16)) == bytes(range(16))
    registry.write("gpu", 40, b"\x07" * 8, 8, "OUTPUT0")
    assert memory[40:48].tolist() == [7] * 8 and memory[48] == 0


def test_a_placement_outside_the_region_is_refused(registry, device):
    device.allocate(HANDLE, 64)
    registry.register_cuda("gpu", HANDLE, 0, 32)  # the first 32 bytes of the allocation
    assert refused(lambda: registry.read("gpu", 32, 4), ErrorCode.INVALID_ARG).startswith(
        "Invalid offset for shared memory region: 'gpu'"
    )
    assert refused(lambda: registry.check("gpu", 16, 17), ErrorCode.INVALID_ARG).startswith(
        "Invalid offset + byte size for shared memory region: 'gpu'"
    )
    message = refused(lambda: registry.write("gpu", 0, b"\0" * 9, 8, "OUT"), ErrorCode.INVALID_ARG)
    assert message.startswith("shared memory size specified with the request for output 'OUT' (8 bytes)")


def test_registration_is_checked_against_the_allocation(registry, device):
    device.allocate(HANDLE, 64)
    message = refused(lambda: registry.register_cuda("big", HANDLE, 0, 65), ErrorCode.INVALID_ARG)
    assert message.startswith("failed to register shared memory region 'big': invalid args")
    assert device.opened == []  # the handle opened for the check is closed again
    message = refused(lambda: registry.register_cuda("bad", b"x" * 64, 0, 8), ErrorCode.INVALID_ARG)
    assert message == "failed to register shared memory region: invalid args"
    message = refused(lambda: registry.register_cuda("short", b"x" * 10, 0, 8), ErrorCode.INVALID_ARG)
    assert message.startswith("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
    assert registry.cuda_status() == []


def test_system_and_cuda_regions_share_one_namespace(registry, device, tmp_path):
    device.allocate(HANDLE, 64)
    registry.register_cuda("gpu", HANDLE, 0, 64)
    message = refused(lambda: registry.register_cuda("gpu", HANDLE, 0, 64), ErrorCode.ALREADY_EXISTS)
    assert message == "shared memory region 'gpu' already in manager"
    message = refused(lambda: registry.register("gpu", "/any_key", 0, 8), ErrorCode.ALREADY_EXISTS)
    assert message == "shared memory region 'gpu' already in manager"
    message = refused(lambda: registry.status("gpu"), ErrorCode.NOT_FOUND)
    assert message == "The region named 'gpu' is registered as CUDA shared memory, not system shared memory"
    registry.unregister("gpu")  # a system unregister leaves the CUDA region alone, as in Triton
    assert registry.cuda_status("gpu")[0]["name"] == "gpu"
    registry.unregister_cuda("gpu")
    assert registry.cuda_status() == [] and device.opened == []
    assert refused(lambda: registry.cuda_status("gpu"), ErrorCode.NOT_FOUND) == (
        "Unable to find cuda shared memory region: 'gpu'"
    )


def test_unregistering_everything_closes_every_handle(registry, device):
    for index in range(3):
        device.allocate(bytes([index]) * 64, 16)
        registry.register_cuda(f"r{index}", bytes([index]) * 64, 0, 16)
    assert len(device.opened) == 3
    registry.unregister_cuda("nosuch")  # no error, as in Triton
    registry.unregister_cuda()
    assert device.opened == [] and registry.cuda_status() == []


def test_listeners_hear_of_each_region_unregistered_until_they_stop(registry, device):
    heard: list[bytes] = []
    stop = registry.cuda.on_unregistered(heard.append)
    for index in range(3):
        device.allocate(bytes([index]) * 64, 16)
        registry.register_cuda(f"r{index}", bytes([index]) * 64, 0, 16)
    registry.unregister_cuda("r1")
    registry.unregister_cuda("nosuch")
    assert heard == [bytes([1]) * 64]
    stop()
    registry.unregister_cuda()
    assert heard == [bytes([1]) * 64]


def test_without_cuda_registration_is_refused_in_tritons_words():
    def no_cuda():
        raise CudaUnavailable("cuda-bindings is not installed")

    registry = SharedMemoryRegistry(allow_client=True, cuda=CudaSharedMemoryRegistry(no_cuda))
    message = refused(lambda: registry.register_cuda("r", HANDLE, 0, 8), ErrorCode.INVALID_ARG)
    assert message == "failed to register CUDA shared memory region: 'r', GPUs not supported"
    registry.unregister_cuda()
    assert registry.cuda_status() == []


def test_client_shared_memory_off_refuses_before_cuda_is_loaded():
    loads = []
    registry = SharedMemoryRegistry(allow_client=False, cuda=CudaSharedMemoryRegistry(lambda: loads.append(1)))  # type: ignore[arg-type, return-value]
    message = refused(lambda: registry.register_cuda("r", HANDLE, 0, 8), ErrorCode.UNSUPPORTED)
    assert message.startswith("Client shared memory is disabled")
    assert loads == []


def test_a_server_never_loads_cuda_until_a_region_is_registered():
    # cuda-bindings loads the CUDA runtime library; a server that never sees a CUDA region
    # must not pay for it (nor fail where it is broken).
    script = (
        "import sys, naiad.frontends.http.app, naiad.frontends.grpc.service\n"
        "from naiad.server import Server\n"
        "server = Server()\n"
        "server.shared_memory.cuda_status()\n"
        "print(sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
