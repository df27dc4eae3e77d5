"""Where each field of a config's protobuf text stands: what `naiad check` points its
findings at (and what tells which fields a config writes)."""

from __future__ import annotations

from naiad.config.field_positions import FieldPosition, field_positions
from naiad.protos import model_config_pb2 as pb

TEXT = """name: "m"
max_batch_size: 0
input [
  { name: "x" data_type: TYPE_FP32 dims: [ -1, 2 ] },
  {
    name: "y"
    dims: 3 dims: 4
  }
]
instance_group < count: 2; kind: KIND_CPU >
parameters { key: "k" value: { string_value: "v" } }
"""


def test_each_field_is_placed_at_its_name_and_each_list_element_at_its_brace():
    positions = field_positions(TEXT, pb.ModelConfig.DESCRIPTOR)
    assert positions == {
        "name": FieldPosition(1, 1, scalar=True),
        "max_batch_size": FieldPosition(2, 1, scalar=True),
        "input[0]": FieldPosition(4, 3, scalar=False),
        "input[0].name": FieldPosition(4, 5, scalar=True),
        "input[0].data_type": FieldPosition(4, 15, scalar=True),
        "input[0].dims": FieldPosition(4, 36, scalar=True),
        "input[1]": FieldPosition(5, 3, scalar=False),
        "input[1].name": FieldPosition(6, 5, scalar=True),
        "input[1].dims": FieldPosition(7, 5, scalar=True),
        "instance_group[0]": FieldPosition(10, 1, scalar=False),
        "instance_group[0].count": FieldPosition(10, 18, scalar=True),
        "instance_group[0].kind": FieldPosition(10, 28, scalar=True),
        "parameters[0]": FieldPosition(11, 1, scalar=False),
        "parameters[0].key": FieldPosition(11, 14, scalar=True, in_map=True),
        "parameters[0].value": FieldPosition(11, 23, scalar=False, in_map=True),
        "parameters[0].value.string_value": FieldPosition(11, 32, scalar=True, in_map=True),
    }


def test_text_the_walk_cannot_read_keeps_what_came_before():
    positions = field_positions('max_batch_size: 4\ninput { name: "x" ', pb.ModelConfig.DESCRIPTOR)
    assert positions["max_batch_size"] == FieldPosition(1, 1, scalar=True)
    assert positions["input[0].name"] == FieldPosition(2, 9, scalar=True)
