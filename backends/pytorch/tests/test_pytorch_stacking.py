"""Inputs stacked by torch.cat (one call without the interpreter lock) equal numpy's stacking
for every datatype a PyTorch model takes, into a destination or a new array; what torch does
not copy is stacked by numpy; read-only request memory is read in place."""

from __future__ import annotations

import numpy as np
import pytest
from naiad_backend_pytorch.stacking import torch_concatenate

DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64"]


def parts(dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    arrays = [(rng.standard_normal((rows, 3, 2)) * 100).astype(dtype) for rows in (2, 1, 3)]
    for array in arrays:
        array.flags.writeable = False  # as a request's tensor viewing the wire's bytes is
    return arrays


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_stacks_what_numpy_stacks(dtype: str) -> None:
    arrays = parts(dtype)
    expected = np.concatenate(arrays, axis=0)
    made = torch_concatenate(arrays, None)
    out = np.zeros_like(expected)
    into = torch_concatenate(arrays, out)
    assert made.dtype == expected.dtype and made.shape == expected.shape
    np.testing.assert_array_equal(made, expected)
    assert into is out
    np.testing.assert_array_equal(out, expected)


def test_what_torch_does_not_copy_is_stacked_by_numpy() -> None:
    words = [np.array([[b"a"]], dtype=object), np.array([[b"bc"]], dtype=object)]
    assert torch_concatenate(words, None).tolist() == [[b"a"], [b"bc"]]
    wide = [np.array([1, 2], np.uint64), np.array([2**63], np.uint64)]
    out = np.zeros(3, np.uint64)
    assert torch_concatenate(wide, out) is out and out.tolist() == [1, 2, 2**63]


def test_a_non_contiguous_array_is_stacked_by_its_values() -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    arrays = [base[:, ::2], np.ones((1, 3), np.float32)]
    np.testing.assert_array_equal(torch_concatenate(arrays, None), np.concatenate(arrays, axis=0))
