"""The line a finding points at: the field path, ensemble step or tensor a server message
names, placed in config.pbtxt."""

from __future__ import annotations

from naiad.config.model_config import parse_config_text
from naiad.repository_check.config_source import ConfigSource

TEXT = """platform: "ensemble"
max_batch_size: 4
input [
  { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OTHER" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group { passive: true }
ensemble_scheduling {
  step [
    { model_name: "a" input_map { key: "x" value: "IN" } output_map { key: "y" value: "mid" } },
    { model_name: "b" input_map { key: "x" value: "mid" } output_map { key: "y" value: "OUT" } }
  ]
}
"""


def source() -> ConfigSource:
    config = ConfigSource("e", "e/config.pbtxt", TEXT)
    config.proto = parse_config_text(TEXT, "e")
    return config


def test_a_field_path_in_the_message_places_it():
    assert source().locate("input 'OTHER' (input[1].dims): dims must not be empty") == (5, 40)


def test_a_path_without_indices_finds_the_first_element():
    assert source().locate("config field 'instance_group.passive' has no effect in naiad") == (8, 18)


def test_an_ensemble_step_places_it():
    assert source().locate("ensemble 'e', step 1 (model 'b'), tensor 'mid': inconsistent shape") == (12, 5)


def test_a_tensor_named_places_it():
    assert source().locate("model 'e', tensor 'OUT': the model expects 2 dimensions") == (7, 10)
    assert source().locate("model input 'OTHER' must specify 'dims'") == (5, 3)


def test_a_plain_field_name_places_it():
    assert source().locate("'max_batch_size' must be non-negative value for e") == (2, 1)


def test_else_the_field_the_check_is_about_places_it():
    assert source().locate("something the message does not place", "ensemble_scheduling") == (9, 1)
    assert source().locate("something the message does not place") == (None, None)
