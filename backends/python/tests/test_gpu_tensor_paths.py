"""The Python backend's GPU-facing paths that run without a GPU: the device a DLPack capsule
names is read from the capsule itself (a CUDA capsule is never read as host memory), and
Triton's FORCE_CPU_ONLY_INPUT_TENSORS is checked at load. tests/gpu/test_python_backend_gpu.py
proves the GPU side on a GPU."""

from __future__ import annotations

import ctypes
import shutil

import numpy as np
import pytest
import torch
from naiad_backend_python.model_side import pb_utils
from naiad_backend_python.model_side.dlpack_host import capsule_device, host_array
from python_backend_servers import MODELS, ServerThread

from naiad import ServerOptions


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_uint8 * 4),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def a_capsule_describing(device_type: int, device_id: int, managed: _DLManagedTensor):
    """A capsule (never handed to a consumer) that says its tensor lives on that device."""
    managed.dl_tensor.device_type, managed.dl_tensor.device_id = device_type, device_id
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(managed), b"dltensor", None)


def test_a_capsule_says_its_own_device():
    assert capsule_device(torch.utils.dlpack.to_dlpack(torch.ones(2))) == (1, 0)
    managed = _DLManagedTensor()
    assert capsule_device(a_capsule_describing(2, 3, managed)) == (2, 3)  # kDLCUDA, GPU 3


def test_host_tensors_are_read_in_place():
    array = np.arange(6, dtype=np.float32)
    assert np.shares_memory(host_array(array), array)
    assert host_array(torch.utils.dlpack.to_dlpack(torch.arange(3))).tolist() == [0, 1, 2]
    tensor = pb_utils.Tensor.from_dlpack("x", torch.utils.dlpack.to_dlpack(torch.full((2,), 7.0)))
    assert tensor.as_numpy().tolist() == [7.0, 7.0] and tensor.is_cpu()


def test_a_used_capsule_is_a_clear_error():
    capsule = torch.utils.dlpack.to_dlpack(torch.ones(2))
    torch.utils.dlpack.from_dlpack(capsule)  # consumes it
    with pytest.raises(pb_utils.TritonModelException, match="tensor 'x': cannot read DLPack tensor"):
        pb_utils.Tensor.from_dlpack("x", capsule)


@pytest.mark.parametrize(("value", "loads"), [("yes", True), ("no", True), ("NO", True), ("maybe", False)])
def test_force_cpu_only_input_tensors_is_checked_at_load(tmp_path, value, loads):
    model_dir = tmp_path / "forced"
    shutil.copytree(MODELS / "init_args", model_dir)
    config = (model_dir / "config.pbtxt").read_text().replace('"init_args"', '"forced"')
    config += f'parameters {{ key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: {{ string_value: "{value}" }} }}\n'
    (model_dir / "config.pbtxt").write_text(config)
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        failures = server.server.startup_failures
        if loads:
            assert failures == []
        else:
            [failure] = failures
            assert "parameters.FORCE_CPU_ONLY_INPUT_TENSORS: expected" in failure and "'maybe'" in failure
    finally:
        server.close()
