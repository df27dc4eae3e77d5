"""naiad.batching: requests stacked along axis 0 and outputs split back per request."""

import numpy as np
import pytest

from naiad import InferenceRequest, NaiadError, Tensor
from naiad.batching import group_stackable, split_outputs, stack_requests


def req(**arrays):
    return InferenceRequest("m", [Tensor.from_numpy(name, array) for name, array in arrays.items()])


def test_stack_and_split_round_trip_with_bytes():
    a = [np.arange(n * 3, dtype=np.int32).reshape(n, 3) for n in (1, 2, 3)]
    s = [np.array([[f"w{i}".encode()]] * n, dtype=object) for i, n in enumerate((1, 2, 3))]
    requests = [req(A=x, S=y) for x, y in zip(a, s)]
    batch = stack_requests(requests)
    assert batch.sizes == [1, 2, 3] and batch.total == 6
    assert batch.inputs["A"].shape == (6, 3) and batch.inputs["S"].dtype == object
    for original, part in zip(a, split_outputs(batch.inputs["A"] * 2, batch.sizes)):
        np.testing.assert_array_equal(part, original * 2)
    assert [p.tolist() for p in split_outputs(batch.inputs["S"], batch.sizes)] == [y.tolist() for y in s]


def test_groups_keep_order_and_separate_shapes():
    requests = [req(A=np.ones((1, 4))), req(A=np.ones((2, 5))), req(A=np.ones((3, 4)))]
    assert group_stackable(requests) == [[0, 2], [1]]


def test_split_refuses_an_output_without_the_batch():
    with pytest.raises(NaiadError) as info:
        split_outputs(np.ones((4, 2)), [2, 3], "OUT")
    assert "output 'OUT'" in info.value.message and "first dimension to be 5" in info.value.message
