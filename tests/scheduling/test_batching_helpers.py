"""The batch helpers backends use to stack requests and split outputs."""

from __future__ import annotations

import numpy as np
import pytest

from naiad import InferenceRequest, NaiadError, Tensor
from naiad.backend.batching import Batch, execute_by_name, split_output_tensors, stack_requests
from naiad.config.model_config import parse_config_text, validate_config


def request(**arrays) -> InferenceRequest:
    return InferenceRequest("m", [Tensor.from_numpy(name, array) for name, array in arrays.items()])


def test_stack_and_split_round_trip_numbers_and_bytes():
    requests = [
        request(X=np.arange(4, dtype=np.float32).reshape(2, 2), S=np.array([[b"a"], [b"bb"]], dtype=object)),
        request(X=np.full((1, 2), 9, np.float32), S=np.array([[b"ccc"]], dtype=object)),
    ]
    batch = Batch.stack(requests)
    assert batch.sizes == [2, 1] and batch.total == 3
    assert batch.inputs["X"].shape == (3, 2)
    assert batch.inputs["S"].tolist() == [[b"a"], [b"bb"], [b"ccc"]]
    responses = batch.responses({"Y": batch.inputs["X"] * 2, "T": batch.inputs["S"]})
    first, second = responses
    np.testing.assert_array_equal(first.output("Y").data, np.arange(4, dtype=np.float32).reshape(2, 2) * 2)
    assert second.output("Y").shape == (1, 2) and second.output("Y").datatype == "FP32"
    assert first.output("T").datatype == "BYTES" and first.output("T").data.tolist() == [[b"a"], [b"bb"]]
    assert second.output("T").data.tolist() == [[b"ccc"]]


def test_inputs_a_backend_gathers_itself_are_left_out_of_the_stack():
    """`leave` (a GPU backend reading inputs in device memory): those are not stacked, the
    others are, and the batch keeps each request's size even when every input is left."""
    requests = [
        request(X=np.ones((2, 2), np.float32), Y=np.zeros((2, 1), np.int32)),
        request(X=np.ones((3, 2), np.float32), Y=np.zeros((3, 1), np.int32)),
    ]
    batch = Batch.stack(requests, leave={"X"})
    assert list(batch.inputs) == ["Y"] and batch.inputs["Y"].shape == (5, 1)
    everything = Batch.stack(requests, leave={"X", "Y"})
    assert everything.inputs == {} and everything.sizes == [2, 3]


def test_stacked_inputs_go_where_the_backend_says():
    """`into` (a GPU backend's pinned memory) receives each stacked input, a lone request's
    too; an input it declines (None) or cannot hold (strings) is stacked as usual."""
    kept: dict[str, np.ndarray] = {}
    offered = []

    def into(name, shape, dtype):
        offered.append((name, shape, dtype))
        if name == "Z":
            return None
        kept[name] = np.full(shape, -1, dtype)
        return kept[name]

    alone = request(X=np.arange(6, dtype=np.float32).reshape(2, 3), Z=np.ones((2, 1), np.int64))
    batch = Batch.stack([alone], into=into)
    assert np.shares_memory(batch.inputs["X"], kept["X"])
    np.testing.assert_array_equal(kept["X"], alone.input("X").data)
    assert not np.shares_memory(batch.inputs["X"], alone.input("X").data)

    kept.clear()
    offered.clear()
    second = request(X=np.full((1, 3), 7, np.float32), Z=np.zeros((1, 1), np.int64))
    batch = Batch.stack([alone, second], into=into)
    assert offered == [("X", (3, 3), np.dtype(np.float32)), ("Z", (3, 1), np.dtype(np.int64))]
    assert np.shares_memory(batch.inputs["X"], kept["X"])
    assert kept["X"].tolist() == [[0, 1, 2], [3, 4, 5], [7, 7, 7]]
    assert batch.inputs["Z"].tolist() == [[1], [1], [0]] and "Z" not in kept

    offered.clear()
    words = [request(S=np.array([[b"a"]], dtype=object)), request(S=np.array([[b"b"]], dtype=object))]
    batch = Batch.stack(words, into=into)
    assert offered == [("S", (2, 1), np.dtype(object))] and batch.inputs["S"].tolist() == [[b"a"], [b"b"]]


def test_output_datatypes_follow_the_config():
    config = validate_config(
        parse_config_text(
            """name: "m" backend: "numpy" max_batch_size: 4
input [{name:"X" data_type: TYPE_FP32 dims:[1]}]
output [{name:"Y" data_type: TYPE_FP16 dims:[1]}]""",
            "m",
        ),
        "m",
    )
    batch = Batch.stack([request(X=np.ones((1, 1), np.float32))] * 2, config)
    responses = batch.responses({"Y": np.ones((2, 1), np.float64)})
    assert [r.output("Y").datatype for r in responses] == ["FP16", "FP16"]
    assert responses[0].output("Y").data.dtype == np.float16


def test_ragged_input_is_flattened_and_batch_inputs_describe_it():
    config = validate_config(
        parse_config_text(
            """name: "m" backend: "numpy" max_batch_size: 8
input [{name:"X" data_type: TYPE_FP32 dims:[-1] allow_ragged_batch: true}]
output [{name:"Y" data_type: TYPE_FP32 dims:[1]}]
batch_input [{kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "OFFSETS" data_type: TYPE_INT32 source_input: "X"},
             {kind: BATCH_ELEMENT_COUNT target_name: "COUNTS" data_type: TYPE_INT32 source_input: "X"},
             {kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "MAX" data_type: TYPE_INT32 source_input: "X"}]""",
            "m",
        ),
        "m",
    )
    requests = [request(X=np.ones((1, 3), np.float32)), request(X=np.full((1, 5), 2, np.float32))]
    batch = Batch.stack(requests, config)
    assert batch.inputs["X"].tolist() == [1.0] * 3 + [2.0] * 5
    assert batch.inputs["OFFSETS"].tolist() == [3, 8]
    assert batch.inputs["COUNTS"].tolist() == [3, 5]
    assert batch.inputs["MAX"].shape == (5,)


def test_mismatched_shapes_and_row_counts_are_reported():
    with pytest.raises(NaiadError) as info:
        stack_requests([request(X=np.ones((1, 3), np.float32)), request(X=np.ones((1, 4), np.float32))])
    assert "'X'" in info.value.message and "allow_ragged_batch" in info.value.message
    with pytest.raises(NaiadError) as info:
        split_output_tensors({"Y": np.ones((2, 1))}, [1, 2])
    assert "'Y'" in info.value.message and "to be 3" in info.value.message


def test_model_without_batch_dimension_takes_one_request_as_is():
    config = validate_config(
        parse_config_text(
            """name: "m" backend: "numpy" max_batch_size: 0
input [{name:"X" data_type: TYPE_FP32 dims:[2]}]
output [{name:"Y" data_type: TYPE_FP32 dims:[2]}]""",
            "m",
        ),
        "m",
    )
    only = request(X=np.ones(2, np.float32))
    batch = Batch.stack([only], config)
    assert batch.inputs["X"] is only.inputs[0].data and batch.sizes == [1]
    with pytest.raises(NaiadError):
        Batch.stack([only, only], config)


def test_execute_by_name_runs_once_and_isolates_a_refused_request():
    config = validate_config(
        parse_config_text(
            """max_batch_size: 8
        input [{ name: "X" data_type: TYPE_FP32 dims: [2] }]
        output [{ name: "Y" data_type: TYPE_FP32 dims: [2] }, { name: "Z" data_type: TYPE_FP32 dims: [2] }]""",
            "m",
        ),
        "m",
    )
    calls = []

    def run(inputs, wanted):
        calls.append((inputs["X"].shape[0], wanted))
        if (inputs["X"] < 0).any():
            raise ValueError("negative values")
        return {"Y": inputs["X"] * 2, "Z": inputs["X"] + 1}

    def request(*rows):
        return InferenceRequest("m", [Tensor.from_numpy("X", np.array(rows, np.float32))])

    good = [request([1, 2]), request([3, 4], [5, 6])]
    responses = execute_by_name(good, config, run, lambda exc: NaiadError.invalid(str(exc)))
    assert calls == [(3, ["Y", "Z"])]
    np.testing.assert_array_equal(responses[1].output("Y").data, [[6, 8], [10, 12]])

    calls.clear()
    mixed = [request([1, 2]), request([-1, 0]), request([3, 4])]
    responses = execute_by_name(mixed, config, run, lambda exc: NaiadError.invalid(str(exc)))
    assert [c[0] for c in calls] == [3, 1, 1, 1]  # the batch, then each request alone
    assert responses[1].error is not None and "negative values" in responses[1].error.message
    np.testing.assert_array_equal(responses[2].output("Z").data, [[4, 5]])
    assert responses[0].error is None and responses[2].error is None


def test_a_backend_concatenates_the_stacked_inputs_itself():
    """`concatenate` makes every stacked input, into `into`'s array where there is one; a lone
    request's arrays are still the batch, and inputs of mixed datatypes stay numpy's."""
    calls = []

    def concatenate(arrays, out):
        calls.append((len(arrays), out is not None))
        stacked = np.concatenate(arrays, axis=0)
        if out is None:
            return stacked
        out[...] = stacked
        return out

    first = request(X=np.arange(4, dtype=np.float32).reshape(2, 2))
    second = request(X=np.full((1, 2), 5, np.float32))
    batch = Batch.stack([first, second], concatenate=concatenate)
    assert calls == [(2, False)] and batch.inputs["X"].tolist() == [[0, 1], [2, 3], [5, 5]]

    calls.clear()
    kept = np.zeros((3, 2), np.float32)
    batch = Batch.stack([first, second], into=lambda name, shape, dtype: kept, concatenate=concatenate)
    assert calls == [(2, True)] and batch.inputs["X"] is kept and kept.tolist() == [[0, 1], [2, 3], [5, 5]]

    calls.clear()
    assert Batch.stack([first], concatenate=concatenate).inputs["X"] is first.input("X").data and calls == []
    mixed = [request(X=np.ones((1, 2), np.float32)), request(X=np.ones((1, 2), np.float64))]
    assert Batch.stack(mixed, concatenate=concatenate).inputs["X"].dtype == np.float64 and calls == []
