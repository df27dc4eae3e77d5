"""The fields a config writes, read from its text or its JSON form: what tells a written
`max_batch_size: 0` from none, which the parsed protobuf cannot."""

from __future__ import annotations

from google.protobuf import text_format

from naiad.config.written_fields import changed_fields, fields_written_in_dict, fields_written_in_text
from naiad.protos import model_config_pb2 as pb

# Every shape protobuf text takes: comments, both brace kinds, lists and repeated fields,
# separators, adjacent strings, negative numbers, enums, an empty list, a map.
TEXT = """
name: "m"  # a comment
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 2 ] }, { name: "y" dims: 3 dims: 4 } ]
output { name: 'o' "ut" dims: [] }
instance_group < count: 0; kind: KIND_CPU >
sequence_batching { max_sequence_idle_microseconds: 0 }
parameters { key: "k" value: { string_value: "v" } }
optimization { input_pinned_memory { enable: false } }
"""


def test_every_field_the_text_writes_is_found_zeros_included():
    assert fields_written_in_text(TEXT, pb.ModelConfig.DESCRIPTOR) == {
        "name",
        "max_batch_size",
        "input[0].name",
        "input[0].data_type",
        "input[0].dims",
        "input[1].name",
        "input[1].dims",
        "output[0].name",
        "output[0].dims",
        "instance_group[0].count",
        "instance_group[0].kind",
        "sequence_batching.max_sequence_idle_microseconds",
        "optimization.input_pinned_memory.enable",
    }


def test_a_text_without_the_field_does_not_write_it():
    assert "max_batch_size" not in fields_written_in_text('name: "m"', pb.ModelConfig.DESCRIPTOR)


def test_every_field_the_json_form_writes_is_found_in_either_spelling():
    data = {
        "maxBatchSize": 0,
        "input": [{"name": "x", "dims": [1]}],
        "dynamic_batching": {"max_queue_delay_microseconds": 0},
        "parameters": {"k": {"string_value": "v"}},
    }
    assert fields_written_in_dict(data, pb.ModelConfig.DESCRIPTOR) == {
        "max_batch_size",
        "input[0].name",
        "input[0].dims",
        "dynamic_batching.max_queue_delay_microseconds",
    }


def test_changed_fields_names_each_written_value_that_changed_with_both_values():
    before = text_format.Parse(TEXT, pb.ModelConfig())
    after = pb.ModelConfig()
    after.CopyFrom(before)
    after.max_batch_size = 4
    after.instance_group[0].count = 2
    after.instance_group[0].kind = pb.ModelInstanceGroup.KIND_GPU
    after.optimization.output_pinned_memory.enable = True  # not written: not reported
    written = fields_written_in_text(TEXT, pb.ModelConfig.DESCRIPTOR)
    assert changed_fields(before, after, written) == [
        ("instance_group[0].count", 0, 2),
        ("instance_group[0].kind", "KIND_CPU", "KIND_GPU"),
        ("max_batch_size", 0, 4),
    ]
