"""`naiad serve app.py`: models declared in a Python file, served over real sockets and
asked through tritonclient over HTTP and gRPC; beside a model repository, in an ensemble,
with several workers, and reloaded when the file changes."""

import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

# The acceptance example of issue #37, exactly as a user writes it.
ACCEPTANCE_APP = """\
import numpy as np
import naiad

@naiad.model(inputs={"x": ("FP32", [-1, 4])}, outputs={"y": ("FP32", [-1, 4])}, max_batch_size=8)
def double(x: np.ndarray) -> dict:
    return {"y": x * 2}
"""

SEVERAL_APP = """\
import asyncio

import numpy as np
import naiad


@naiad.model(inputs={"x": ("FP32", [-1, 4])}, outputs={"y": ("FP32", [-1, 4])}, max_batch_size=8)
def double(x):
    return {"y": x * 2}


@naiad.model("offset", inputs={"x": ("FP32", [-1, 4])}, outputs={"y": ("FP32", [-1, 4])}, max_batch_size=8)
class Offset:
    def setup(self):
        self.offset = np.float32(100)

    def __call__(self, x):
        return {"y": x + self.offset}


@naiad.model(inputs={"x": ("FP32", [-1, 4])}, outputs={"total": ("FP32", [-1, 1])}, max_batch_size=8)
async def total(x):
    await asyncio.sleep(0)
    return {"total": x.sum(axis=1, keepdims=True)}
"""

# An ensemble in a repository whose steps are the app's models: double, then offset.
ENSEMBLE_CONFIG = """\
name: "double_then_offset"
platform: "ensemble"
max_batch_size: 8
input [{ name: "IN" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [
  { model_name: "double" model_version: -1 input_map { key: "x" value: "IN" } output_map { key: "y" value: "doubled" } },
  { model_name: "offset" model_version: -1 input_map { key: "x" value: "doubled" } output_map { key: "y" value: "OUT" } }
] }
"""

X = np.arange(8, dtype=np.float32).reshape(2, 4)


def write_app(directory: Path, text: str, name: str = "app.py") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def http_infer(server: ServerProcess, model: str, x: np.ndarray, inp: str = "x", out: str = "y") -> np.ndarray:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput(inp, list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(model, [tensor]).as_numpy(out)


def grpc_infer(server: ServerProcess, model: str, x: np.ndarray, inp: str = "x", out: str = "y") -> np.ndarray:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    tensor = grpcclient.InferInput(inp, list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(model, [tensor]).as_numpy(out)


def test_the_acceptance_example_answers_http_and_grpc(tmp_path):
    app = write_app(tmp_path, ACCEPTANCE_APP)
    with ServerProcess(str(app)) as server:
        np.testing.assert_array_equal(http_infer(server, "double", X), X * 2)
        np.testing.assert_array_equal(grpc_infer(server, "double", X), X * 2)
        http = httpclient.InferenceServerClient(server.http_url)
        assert http.is_server_ready() and http.is_model_ready("double")
        assert http.get_model_metadata("double")["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
        config = grpcclient.InferenceServerClient(server.grpc_url).get_model_config("double", as_json=True)["config"]
        assert config["backend"] == "naiad_function" and config["max_batch_size"] == 8
        assert "dynamic_batching" in config
        stats = http.get_inference_statistics("double")["model_stats"][0]
        assert stats["inference_stats"]["success"]["count"] == 2
        metrics = requests.get(server.metrics_url, timeout=10).text
        assert 'nv_inference_request_success{model="double",version="1"} 2' in metrics
        assert http.get_model_repository_index() == [{"name": "double", "version": "1", "state": "READY"}]


def test_classes_async_functions_a_repository_and_an_ensemble(tmp_path):
    app = write_app(tmp_path, SEVERAL_APP)
    repository = tmp_path / "models"
    (repository / "double_then_offset" / "1").mkdir(parents=True)
    (repository / "double_then_offset" / "config.pbtxt").write_text(ENSEMBLE_CONFIG)
    with ServerProcess(str(app), repository) as server:
        np.testing.assert_array_equal(http_infer(server, "offset", X), X + 100)
        np.testing.assert_array_equal(grpc_infer(server, "total", X, out="total"), X.sum(axis=1, keepdims=True))
        ensemble = grpc_infer(server, "double_then_offset", X, inp="IN", out="OUT")
        np.testing.assert_array_equal(ensemble, X * 2 + 100)
        index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
        assert sorted(row["name"] for row in index) == ["double", "double_then_offset", "offset", "total"]


def test_a_bad_app_file_is_named_and_the_server_does_not_start(tmp_path):
    broken = write_app(tmp_path, "import naiad\nraise RuntimeError('missing weights')\n", "broken.py")
    server = ServerProcess(str(broken))
    with pytest.raises(RuntimeError) as info:
        server.start()
    server.stop()
    assert str(info.value).startswith("naiad exited with 1:")
    assert f"error: creating server: app file '{broken}' failed to import: RuntimeError: missing weights" in str(
        info.value
    )


def test_reload_follows_the_app_file(tmp_path):
    app = write_app(tmp_path, ACCEPTANCE_APP)
    with ServerProcess(str(app), "--reload") as server:
        np.testing.assert_array_equal(http_infer(server, "double", X), X * 2)

        # A change to the function serves at once; a new model loads.
        write_app(
            tmp_path,
            ACCEPTANCE_APP.replace("x * 2", "x * 3")
            + textwrap.dedent("""
                @naiad.model(inputs={"x": ("FP32", [-1, 4])}, outputs={"y": ("FP32", [-1, 4])}, max_batch_size=8)
                def negate(x):
                    return {"y": -x}
            """),
        )
        wait_for(lambda: _answer(server, "double") == (X * 3).tolist())
        np.testing.assert_array_equal(grpc_infer(server, "negate", X), -X)

        # A file that fails to import changes nothing.
        write_app(tmp_path, ACCEPTANCE_APP + "\ndef broken(:\n")
        wait_for(lambda: "reload: app file" in server.log() and "failed to import: SyntaxError" in server.log())
        np.testing.assert_array_equal(http_infer(server, "double", X), X * 3)

        # A model the file no longer declares unloads.
        write_app(tmp_path, ACCEPTANCE_APP)
        wait_for(lambda: _answer(server, "double") == (X * 2).tolist())
        with pytest.raises(InferenceServerException) as info:
            http_infer(server, "negate", X)
        assert "negate" in info.value.message()
        assert not httpclient.InferenceServerClient(server.http_url).is_model_ready("negate")


@pytest.mark.slow
def test_with_several_workers_the_model_home_imports_and_reloads_the_app(tmp_path):
    # The file notes each process that imports it: the model home alone should.
    imports = tmp_path / "imported_by"
    app = write_app(tmp_path, f"import os\nopen({str(imports)!r}, 'a').write(f'{{os.getpid()}}\\n')\n" + ACCEPTANCE_APP)
    with ServerProcess(str(app), "--reload", workers=2) as server:
        home = str(server.model_home_pid())
        assert imports.read_text().split() == [home]
        for _ in range(4):  # over fresh connections, whichever worker takes them
            np.testing.assert_array_equal(http_infer(server, "double", X), X * 2)
            np.testing.assert_array_equal(grpc_infer(server, "double", X), X * 2)
        stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("double")
        assert stats["model_stats"][0]["inference_stats"]["success"]["count"] == 8

        # The model home reloads; every worker serves the new code.
        app.write_text(app.read_text().replace("x * 2", "x * 5"))
        wait_for(lambda: all(_answer(server, "double") == (X * 5).tolist() for _ in range(4)))
        assert imports.read_text().split() == [home, home]


def _answer(server: ServerProcess, model: str) -> list:
    try:
        return http_infer(server, model, X).tolist()
    except InferenceServerException:
        return []


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.1)


def test_explicit_mode_loads_only_the_declared_models_asked_for(tmp_path):
    app = write_app(tmp_path, SEVERAL_APP)
    with ServerProcess(str(app), "--model-control-mode", "explicit", "--load-model", "double") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert [row["name"] for row in client.get_model_repository_index() if row.get("state") == "READY"] == ["double"]
        assert not client.is_model_ready("offset")
        client.load_model("offset")
        np.testing.assert_array_equal(http_infer(server, "offset", X), X + 100)
        client.unload_model("double")
        assert not client.is_model_ready("double")


def test_a_name_both_declared_and_in_a_repository_fails_to_load(tmp_path):
    app = write_app(tmp_path, ACCEPTANCE_APP)
    repository = tmp_path / "models"
    (repository / "double" / "1").mkdir(parents=True)
    server = ServerProcess(str(app), repository)
    with pytest.raises(RuntimeError) as info:
        server.start()
    server.stop()
    assert f"model 'double' appears in more than one model repository: {repository.resolve()}, {app}" in str(info.value)
