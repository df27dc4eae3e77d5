"""`naiad serve --backend-plugin MODULE:OBJECT` registers a plugin object (a class is
instantiated) and refuses a bad spec with a message naming it."""

import sys

import pytest
from numpy_backend import NumpyPlugin

from naiad.cli import build_parser, load_plugin, options_from_args


def test_plugin_is_loaded_into_server_options():
    args = build_parser().parse_args(
        ["serve", "--model-repository", "m", "--backend-plugin", "numpy_backend:NumpyPlugin"]
    )
    (plugin,) = options_from_args(args).backend_plugins
    assert isinstance(plugin, NumpyPlugin)


def test_module_level_object_is_used_as_is():
    assert load_plugin("numpy_backend:np") is sys.modules["numpy_backend"].np


@pytest.mark.parametrize(
    "spec,message",
    [
        ("numpy_backend", "expected MODULE:OBJECT, got 'numpy_backend'"),
        ("no_such_module_x:P", "cannot import 'no_such_module_x'"),
        ("numpy_backend:Nope", "module 'numpy_backend' has no 'Nope'"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(SystemExit) as info:
        load_plugin(spec)
    assert message in str(info.value)
