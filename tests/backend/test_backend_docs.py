"""docs/backends/writing-a-backend.md states the backend interface: every hook is in it,
and its example backend really serves."""

import asyncio
import re
import types
from pathlib import Path

import numpy as np

from naiad import InferenceRequest, Server, ServerOptions, Tensor
from naiad.backend import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends" / "writing-a-backend.md"


def test_every_hook_is_documented():
    hooks = [name for name in vars(hookspecs.BackendHookSpecs) if name.startswith("naiad_")]
    assert hooks
    text = DOC.read_text()
    assert [h for h in hooks if f"`{h}(" not in text] == []


def test_documented_example_backend_serves(tmp_path):
    code = re.findall(r"```python\n# naiad_backend_echo/plugin.py\n(.*?)```", DOC.read_text(), re.S)[0]
    plugin = types.ModuleType("echo_plugin")
    exec(compile(code, "writing-a-backend.md", "exec"), plugin.__dict__)
    (tmp_path / "echo" / "1").mkdir(parents=True)
    (tmp_path / "echo" / "config.pbtxt").write_text(
        'backend: "echo" input [{ name: "INPUT0" data_type: TYPE_STRING dims: [-1] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_STRING dims: [-1] }]'
    )

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[plugin])) as server:
            data = np.array([b"a", b"bc"], dtype=object)
            response = await server.infer(InferenceRequest("echo", [Tensor.from_numpy("INPUT0", data)]))
            assert list(response.output("OUTPUT0").data) == [b"a", b"bc"]

    asyncio.run(go())
