"""`complete_tensors`, the auto-complete steps every framework backend (onnxruntime,
PyTorch, TensorFlow, TensorRT) shares: one rule for what is added, filled in and refused."""

from dataclasses import dataclass

import pytest

from naiad.backend import ConfigError
from naiad.backend.helpers import complete_tensors
from naiad.backend.helpers import model_config_pb2 as pb


@dataclass(frozen=True)
class Found:
    name: str
    datatype: str | None
    shape: tuple[int, ...] | None
    native_type: str = "float"


def test_no_config_gets_every_tensor_clients_can_exchange():
    proto = pb.ModelConfig(max_batch_size=8)
    inputs = [Found("x", "FP32", (-1, 4)), Found("k", "INT64", (-1,))]
    outputs = [Found("y", "FP32", (-1, 3)), Found("labels", None, (-1,), "map(int64,float)")]
    complete_tensors(proto, inputs, outputs, batching=True)
    assert [(t.name, pb.DataType.Name(t.data_type), list(t.dims)) for t in proto.input] == [
        ("x", "TYPE_FP32", [4]),
        ("k", "TYPE_INT64", [1]),
    ]
    assert proto.input[1].HasField("reshape") and list(proto.input[1].reshape.shape) == []
    assert [t.name for t in proto.output] == ["y"]  # the map output is left out


def test_what_the_config_says_is_kept_and_unlisted_tensors_stay_out():
    proto = pb.ModelConfig()
    proto.input.add(name="x", data_type=pb.TYPE_FP16, dims=[2, 2])
    complete_tensors(proto, [Found("x", "FP32", (4,)), Found("z", "FP32", (1,))], [], batching=False)
    assert [(t.name, t.data_type, list(t.dims)) for t in proto.input] == [("x", pb.TYPE_FP16, [2, 2])]


def test_an_input_clients_cannot_send_is_refused_naming_its_type():
    proto = pb.ModelConfig()
    with pytest.raises(ConfigError) as info:
        complete_tensors(proto, [Found("seq", None, (-1,), "seq(tensor(float))")], [], False, model="m")
    assert info.value.message == (
        "model 'm': input 'seq' (input[0].data_type): the model's type seq(tensor(float)) has no Triton datatype"
    )


def test_a_tensor_of_open_rank_is_refused_naming_it():
    proto = pb.ModelConfig()
    with pytest.raises(ConfigError) as info:
        complete_tensors(proto, [], [Found("y", "FP32", None)], False, model="m", source="SavedModel")
    assert info.value.message == (
        "model 'm': output 'y' (output[0].dims): the SavedModel leaves the rank of 'y' open; list its dims in "
        "config.pbtxt"
    )


def test_shape_tensors_are_marked_and_keep_their_first_dimension():
    proto = pb.ModelConfig(max_batch_size=4)
    inputs = [Found("x", "FP32", (-1, 4)), Found("shape", "INT32", (2,))]
    complete_tensors(proto, inputs, [], True, shape_tensors={"shape"})
    assert [(t.name, list(t.dims), t.is_shape_tensor) for t in proto.input] == [
        ("x", [4], False),
        ("shape", [2], True),
    ]
