"""docs/backends/writing-a-backend.md states the backend interface: every hook is in it,
in pluggy's style, and its example backend really serves (installed as a package:
test_backend_package.py)."""

import ast
import asyncio
import inspect
import re
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from naiad import InferenceRequest, NaiadError, Server, ServerOptions, Tensor
from naiad.backend import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends" / "writing-a-backend.md"


def test_every_hook_is_documented():
    hooks = [name for name in vars(hookspecs.BackendHookSpecs) if name.startswith("naiad_")]
    assert hooks
    text = DOC.read_text()
    assert [h for h in hooks if f"`{h}(" not in text] == []


def test_hook_specs_are_docstrings_with_the_version_they_came_in():
    """pluggy's own style: a specification's body is its docstring (pluggy never calls it),
    and the docstring says which ABI version added the hook."""
    for name in [n for n in vars(hookspecs.BackendHookSpecs) if n.startswith("naiad_")]:
        function = getattr(hookspecs.BackendHookSpecs, name)
        body = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0].body
        assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), name
        assert re.search(r"\.\. versionadded:: \d+\.\d+", function.__doc__), name


def test_documented_example_is_two_classes_declaring_the_abi():
    code = re.findall(r"```python\n# naiad_backend_echo/__init__.py\n(.*?)```", DOC.read_text(), re.S)[0]
    classes = [node for node in ast.parse(code).body if isinstance(node, ast.ClassDef)]
    assert [c.name for c in classes] == ["EchoInstance", "EchoBackend"]
    assert "abi_version = (2, 0)" in code


def test_documented_example_backend_serves(tmp_path):
    code = re.findall(r"```python\n# naiad_backend_echo/__init__.py\n(.*?)```", DOC.read_text(), re.S)[0]
    plugin = types.ModuleType("naiad_backend_echo")
    exec(compile(code, "writing-a-backend.md", "exec"), plugin.__dict__)
    (tmp_path / "echo" / "1").mkdir(parents=True)
    (tmp_path / "echo" / "config.pbtxt").write_text(
        'backend: "echo" input [{ name: "INPUT0" data_type: TYPE_STRING dims: [-1] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_STRING dims: [-1] }]'
    )

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[plugin.EchoBackend])) as server:
            data = np.array([b"a", b"bc"], dtype=object)
            response = await server.infer(InferenceRequest("echo", [Tensor.from_numpy("INPUT0", data)]))
            assert list(response.output("OUTPUT0").data) == [b"a", b"bc"]

    asyncio.run(go())


def test_documented_settings_class_reads_and_refuses():
    code = re.findall(
        r"```python\n(from dataclasses import dataclass\n.*?class EchoSettings.*?)```", DOC.read_text(), re.S
    )[0]
    namespace: dict = {}
    exec(compile(code, "writing-a-backend.md", "exec"), namespace)
    settings_class = namespace["EchoSettings"]
    read_settings = namespace["read_settings"]
    assert read_settings(settings_class, "echo", {"upper-case": "YES"}).upper_case is True
    with pytest.raises(NaiadError, match=r"--backend-config echo,upper-case: expected true or false .*, got 'maybe'"):
        read_settings(settings_class, "echo", {"upper-case": "maybe"})
