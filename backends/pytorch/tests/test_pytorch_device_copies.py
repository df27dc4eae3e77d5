"""The pieces a GPU instance writes outputs into CUDA shared memory with, on the CPU: a batch's
rows copied into the requests' targets by one torch call whatever the batch's size, byte for
byte as the host path would send them, and the tensors over client regions made once per
address. On a GPU, end to end: tests/gpu/test_device_inputs_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from naiad_backend_pytorch.device_outputs import copy_rows
from naiad_backend_pytorch.device_views import DeviceViews
from torch.utils._python_dispatch import TorchDispatchMode


def targets_for(value: torch.Tensor, sizes: list[int], skip: set[int] = frozenset()) -> list[torch.Tensor | None]:
    row_bytes = value[0].numel() * value.element_size()
    return [
        None if i in skip else torch.full((rows * row_bytes,), 0xAB, dtype=torch.uint8) for i, rows in enumerate(sizes)
    ]


def host_bytes(value: torch.Tensor) -> bytes:
    """The bytes the host path sends: the output in row-major order."""
    array = value.contiguous().view(torch.uint8).numpy() if value.dim() else value.reshape(1).view(torch.uint8).numpy()
    return array.tobytes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16, torch.bfloat16])
def test_each_request_gets_its_own_rows_and_a_none_target_gets_nothing(dtype):
    sizes = [1, 2, 1, 3]
    value = (torch.arange(7 * 2 * 3) % 5).reshape(7, 2, 3).to(dtype)
    targets = targets_for(value, sizes, skip={2})
    copy_rows(value, sizes, targets)
    first = 0
    for rows, target in zip(sizes, targets):
        if target is not None:
            assert target.numpy().tobytes() == host_bytes(value[first : first + rows])
        first += rows


def test_a_strided_output_is_copied_in_row_major_order():
    value = torch.arange(24, dtype=torch.float32).reshape(3, 8).t()  # [8, 3], not contiguous
    sizes = [5, 3]
    targets = targets_for(value, sizes)
    copy_rows(value, sizes, targets)
    assert targets[0].numpy().tobytes() == host_bytes(value[:5])
    assert targets[1].numpy().tobytes() == host_bytes(value[5:])


@pytest.mark.parametrize("value", [torch.tensor(2.5), torch.arange(6, dtype=torch.int32).reshape(2, 3)])
def test_without_batching_the_one_request_gets_the_whole_output(value):
    target = torch.zeros(value.numel() * value.element_size(), dtype=torch.uint8)
    copy_rows(value, [], [target])
    assert target.numpy().tobytes() == host_bytes(value)


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_for(requests: int) -> list[str]:
    value = torch.randn(requests, 1000)
    targets = targets_for(value, [1] * requests)
    with torch.inference_mode(), OpCounter() as counter:
        copy_rows(value, [1] * requests, targets)
    return counter.ops


def test_a_batch_is_copied_by_as_many_torch_calls_whatever_its_size():
    # Each call gives the interpreter lock away; a call per request would wait once per request.
    two, twelve = ops_for(2), ops_for(12)
    assert two == twelve, (two, twelve)
    assert sum("copy" in op for op in twelve) == 1, twelve


def test_a_device_view_is_made_once_per_address_shape_and_dtype():
    made: list[tuple] = []

    def wrap(pointer, shape, dtype):
        made.append((pointer, shape, dtype.str))
        return object()

    views = DeviceViews(torch.device("cpu"), kept=2, wrap=wrap)
    first = views.tensor(0x1000, (4,), np.dtype(np.uint8))
    assert views.tensor(0x1000, (4,), np.dtype(np.uint8)) is first
    views.tensor(0x1000, (1, 4), np.dtype(np.float32))  # the same bytes seen otherwise: its own view
    assert len(made) == 2
    views.tensor(0x1000, (4,), np.dtype(np.uint8))  # used again: the (1, 4) view is now the oldest
    views.tensor(0x2000, (4,), np.dtype(np.uint8))  # past `kept`: the oldest goes
    assert len(views) == 2
    assert views.tensor(0x1000, (4,), np.dtype(np.uint8)) is first
    views.tensor(0x1000, (1, 4), np.dtype(np.float32))
    assert made[-1] == (0x1000, (1, 4), "<f4") and len(made) == 4
