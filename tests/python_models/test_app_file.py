"""App files read by the in-process server (`ServerOptions.app_files`, what `naiad serve
app.py` passes): what each way of getting one wrong is told, and that the file imports its
neighbours as `python app.py` would."""

import asyncio

import numpy as np

from naiad import InferenceRequest, NaiadError, Server, ServerOptions, Tensor


def start_error(app_file: str) -> str:
    async def go() -> str:
        server = Server(ServerOptions(app_files=[app_file]))
        try:
            await server.start()
        except NaiadError as exc:
            return exc.message
        finally:
            await server.stop()
        raise AssertionError("the server started")

    return asyncio.run(go())


def test_what_is_wrong_with_an_app_file_is_named(tmp_path):
    assert start_error(str(tmp_path / "absent.py")) == (
        f"app file '{tmp_path / 'absent.py'}' does not exist (expected a Python file declaring models)"
    )
    (tmp_path / "notes.txt").write_text("")
    assert start_error(str(tmp_path / "notes.txt")) == f"app file '{tmp_path / 'notes.txt'}' is not a Python file (.py)"
    (tmp_path / "empty.py").write_text("x = 1\n")
    assert start_error(str(tmp_path / "empty.py")) == (
        f"app file '{tmp_path / 'empty.py'}' declares no model: decorate a function or class in it with @naiad.model(...)"
    )
    (tmp_path / "twice.py").write_text(
        "import naiad\n"
        "spec = dict(inputs={'x': ('FP32', [1])}, outputs={'y': ('FP32', [1])})\n"
        "@naiad.model('same', **spec)\ndef a(x): return {'y': x}\n"
        "@naiad.model('same', **spec)\ndef b(x): return {'y': x}\n"
    )
    assert start_error(str(tmp_path / "twice.py")) == f"app file '{tmp_path / 'twice.py'}': two models are named 'same'"


def test_an_app_file_imports_its_neighbours(tmp_path):
    (tmp_path / "python_models_test_factor.py").write_text("FACTOR = 7\n")
    (tmp_path / "app.py").write_text(
        "import naiad\nfrom python_models_test_factor import FACTOR\n"
        "@naiad.model(inputs={'x': ('INT32', [2])}, outputs={'y': ('INT32', [2])})\n"
        "def scaled(x):\n    return {'y': x * FACTOR}\n"
    )

    async def go():
        async with Server(ServerOptions(app_files=[str(tmp_path / "app.py")])) as server:
            x = np.array([1, 2], np.int32)
            response = await server.infer(InferenceRequest("scaled", [Tensor.from_numpy("x", x)]))
            assert response.output("y").data.tolist() == [7, 14]

    asyncio.run(go())
