"""docs/ray.md states build_app's interface: its table must match the signature, and the
builder's arguments must be build_app's."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import naiad_ray

DOC = Path(__file__).resolve().parents[3] / "docs" / "ray.md"


def test_the_argument_table_lists_every_build_app_argument() -> None:
    rows = re.findall(r"^\| `(\w+)` \|", DOC.read_text(), re.M)
    assert rows == list(inspect.signature(naiad_ray.build_app).parameters)


def test_app_builder_takes_build_app_arguments_with_their_defaults() -> None:
    parameters = inspect.signature(naiad_ray.build_app).parameters
    fields = naiad_ray.AppArgs.model_fields
    assert set(fields) == set(parameters) - {"server_options", "deployment_options"}
    for name, field in fields.items():
        if name != "model_repository":
            assert field.default == parameters[name].default, name
