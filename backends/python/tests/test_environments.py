"""Separate servers for what needs its own settings: a model in another virtual
environment (EXECUTION_ENV_PATH), a tiny shared-memory ring, unload and reload."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from python_backend_servers import MODELS, ServerThread, bytes_array

from naiad import ErrorCode, NaiadError, ServerOptions

# ../shared/bench beside the checkout (the shared benchmark), when it is there.
BENCH_MODELS = Path(__file__).resolve().parents[3].parent / "shared" / "bench" / "models"


def base_interpreter() -> str:
    """The interpreter our venv was made from, whose site-packages hold numpy."""
    return getattr(sys, "_base_executable", sys.executable)


@pytest.fixture(scope="module")
def env_repository(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("env_repo")
    model_dir = repo / "in_venv"
    shutil.copytree(MODELS / "init_args", model_dir)
    venv = model_dir / "venv"
    subprocess.run([base_interpreter(), "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    config = (
        (model_dir / "config.pbtxt").read_text().replace('"init_args"', '"in_venv"').replace("count: 2", "count: 1")
    )
    config += 'parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/venv" } }\n'
    (model_dir / "config.pbtxt").write_text(config)
    return repo


def test_model_runs_in_the_named_virtual_environment(env_repository):
    probe = subprocess.run([base_interpreter(), "-c", "import numpy"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("the base interpreter has no numpy to share with the test venv")
    server = ServerThread(ServerOptions(model_repositories=[str(env_repository)]))
    try:
        assert server.server.startup_failures == []
        response = server.infer("in_venv", {"IN": np.array([1], dtype=np.int32)})
        args = json.loads(response.output("ARGS").data[0])
        assert os.path.realpath(args["sys_prefix"]) == os.path.realpath(env_repository / "in_venv" / "venv")
        assert args["model_name"] == "in_venv"
    finally:
        server.close()


def test_model_runs_in_an_environment_archive(env_repository, tmp_path):
    """A packed environment (as conda-pack makes them): unpacked once, then used."""
    import tarfile

    probe = subprocess.run([base_interpreter(), "-c", "import numpy"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("the base interpreter has no numpy to share with the test venv")
    model_dir = tmp_path / "from_archive"
    shutil.copytree(env_repository / "in_venv", model_dir, symlinks=True)
    with tarfile.open(model_dir / "env.tar.gz", "w:gz") as archive:
        archive.add(model_dir / "venv", arcname=".")
    shutil.rmtree(model_dir / "venv")
    config = (model_dir / "config.pbtxt").read_text().replace('"in_venv"', '"from_archive"')
    config = config.replace("$$TRITON_MODEL_DIRECTORY/venv", "env.tar.gz")
    (model_dir / "config.pbtxt").write_text(config)
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        assert server.server.startup_failures == []
        args = json.loads(server.infer("from_archive", {"IN": np.array([1], dtype=np.int32)}).output("ARGS").data[0])
        assert "naiad-python-envs" in args["sys_prefix"]
    finally:
        server.close()


def test_missing_environment_is_a_clear_load_error(tmp_path):
    model_dir = tmp_path / "no_env"
    shutil.copytree(MODELS / "init_args", model_dir)
    config = (model_dir / "config.pbtxt").read_text().replace('"init_args"', '"no_env"')
    config += 'parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "/nonexistent/env" } }\n'
    (model_dir / "config.pbtxt").write_text(config)
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        [failure] = server.server.startup_failures
        assert "EXECUTION_ENV_PATH" in failure and "/nonexistent/env" in failure
    finally:
        server.close()


def test_tensors_larger_than_the_ring_and_ring_wrap_around():
    # A 4 KiB ring: most of these tensors spill into their own segments, the rest wrap.
    options = ServerOptions(
        model_repositories=[str(MODELS)],
        model_control_mode="explicit",
        load_models=["add_sub_flat", "string_identity"],
        backend_config={"python": {"shm-default-byte-size": "4096"}},
    )
    server = ServerThread(options)
    try:
        rng = np.random.default_rng(0)
        for size in (4, 100, 1000, 3000, 250_000, 7, 1000):
            a = rng.standard_normal(size).astype(np.float32)
            b = rng.standard_normal(size).astype(np.float32)
            # add_sub_flat's dims are [4]: send those, and a big BYTES tensor beside it.
            response = server.infer("add_sub_flat", {"INPUT0": a[:4] if size >= 4 else a, "INPUT1": b[:4]})
            np.testing.assert_array_equal(response.output("OUTPUT0").data, a[:4] + b[:4])
            blob = bytes_array(a.tobytes(), b"x" * size)
            echoed = server.infer("string_identity", {"INPUT0": blob}).output("OUTPUT0").data
            assert list(echoed) == list(blob)
        leftovers = [p for p in os.listdir("/dev/shm") if p.startswith(f"naiad-ring-{os.getpid()}-")]
        assert leftovers == []
    finally:
        server.close()


def test_unload_runs_finalize_and_reload_serves_again():
    options = ServerOptions(
        model_repositories=[str(MODELS)], model_control_mode="explicit", load_models=["add_sub_flat"]
    )
    server = ServerThread(options)
    a = np.ones(4, dtype=np.float32)
    try:
        first = server.infer("add_sub_flat", {"INPUT0": a, "INPUT1": a})
        runner = server.server.model("add_sub_flat").runners[0]
        process = runner.instance._connection.process
        server.run(server.server.unload_model("add_sub_flat"))
        assert process.poll() == 0  # finalize ran and the process exited on its own
        with pytest.raises(NaiadError) as caught:
            server.infer("add_sub_flat", {"INPUT0": a, "INPUT1": a})
        assert caught.value.code in (ErrorCode.UNAVAILABLE, ErrorCode.NOT_FOUND)
        server.run(server.server.load_model("add_sub_flat"))
        again = server.infer("add_sub_flat", {"INPUT0": a, "INPUT1": a})
        np.testing.assert_array_equal(again.output("OUTPUT0").data, first.output("OUTPUT0").data)
    finally:
        server.close()


@pytest.mark.skipif(not BENCH_MODELS.is_dir(), reason="the shared bench repository is not on this machine")
def test_bench_repository_answers():
    server = ServerThread(
        ServerOptions(
            model_repositories=[str(BENCH_MODELS)], model_control_mode="explicit", load_models=["add_sub", "identity"]
        )
    )
    try:
        assert server.server.startup_failures == []
        a = np.arange(32, dtype=np.float32).reshape(2, 16)
        b = np.full((2, 16), 3, dtype=np.float32)
        response = server.infer("add_sub", {"INPUT0": a, "INPUT1": b})
        np.testing.assert_array_equal(response.output("OUTPUT0").data, a + b)
        np.testing.assert_array_equal(response.output("OUTPUT1").data, a - b)
        x = np.linspace(0, 1, 9, dtype=np.float32)
        np.testing.assert_array_equal(server.infer("identity", {"INPUT0": x}).output("OUTPUT0").data, x)
    finally:
        server.close()


def test_broken_models_fail_their_load_with_the_reason(tmp_path):
    for name, source in (
        ("syntax_error", "class TritonPythonModel:\n    def execute(self, requests)\n        return []\n"),
        (
            "init_raises",
            "class TritonPythonModel:\n    def initialize(self, args):\n"
            "        raise RuntimeError('no weights found')\n"
            "    def execute(self, requests):\n        return []\n",
        ),
        ("no_class", "x = 1\n"),
    ):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / "model.py").write_text(source)
        (tmp_path / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\ninput [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]\n'
            'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        )
    shutil.copytree(MODELS / "add_sub_flat", tmp_path / "add_sub_flat")
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        failures = " | ".join(server.server.startup_failures)
        assert "model 'syntax_error'" in failures and "SyntaxError" in failures
        assert "model 'init_raises'" in failures and "RuntimeError: no weights found" in failures
        assert "model 'no_class'" in failures and "defines no class TritonPythonModel" in failures
        # The good model beside them serves.
        a = np.ones(4, dtype=np.float32)
        np.testing.assert_array_equal(
            server.infer("add_sub_flat", {"INPUT0": a, "INPUT1": a}).output("OUTPUT0").data, a * 2
        )
        states = {row["name"]: row.get("state") for row in server.server.repository_index()}
        assert states["init_raises"] == "UNAVAILABLE" and states["add_sub_flat"] == "READY"
    finally:
        server.close()


REMEMBER_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.previous = None

    def execute(self, requests):
        responses = []
        for request in requests:
            current = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            # Keep the input array itself (no copy) across requests.
            previous = self.previous if self.previous is not None else np.zeros_like(current)
            self.previous = current
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", current), pb_utils.Tensor("PREV", previous)]))
        return responses
"""


def test_large_tensors_kept_by_model_and_caller_stay_intact(tmp_path):
    """Large tensors are read in place from the rings; arrays that outlive their request
    (kept by the model, or by the caller) must never be overwritten by later traffic."""
    (tmp_path / "remember" / "1").mkdir(parents=True)
    (tmp_path / "remember" / "1" / "model.py").write_text(REMEMBER_MODEL)
    (tmp_path / "remember" / "config.pbtxt").write_text(
        'name: "remember"\nbackend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "PREV" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
    )
    options = ServerOptions(
        model_repositories=[str(tmp_path)], backend_config={"python": {"shm-default-byte-size": str(1024 * 1024)}}
    )
    server = ServerThread(options)
    try:
        sent, kept = [], []
        for i in range(40):
            x = np.full(40_000 + 1000 * (i % 7), float(i), dtype=np.float32)  # 160-184 KB: read in place
            response = server.infer("remember", {"X": x})
            np.testing.assert_array_equal(response.output("Y").data, x)
            if i:
                np.testing.assert_array_equal(response.output("PREV").data, sent[-1])
            sent.append(x)
            if i % 5 == 0:
                kept.append((x, response))  # the caller keeps some responses alive
        for x, response in kept:
            np.testing.assert_array_equal(response.output("Y").data, x)
    finally:
        server.close()


def test_a_model_py_without_config_loads_through_auto_complete(tmp_path):
    (tmp_path / "bare" / "1").mkdir(parents=True)
    shutil.copy(MODELS / "auto_complete" / "1" / "model.py", tmp_path / "bare" / "1" / "model.py")
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        assert server.server.startup_failures == []
        config = server.server.model_config("bare")
        assert config.backend == "python" and config.max_batch_size == 4
        out = server.infer("bare", {"INPUT0": np.array([[1, 2]], dtype=np.float32)}).output("OUTPUT0").data
        np.testing.assert_array_equal(out, [[2, 4]])
    finally:
        server.close()


INCREMENT_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            x += 1  # in place: every input a model receives is its own, writable array
            words = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x), pb_utils.Tensor("T", words)]))
        return responses
"""


def test_inputs_of_every_size_arrive_whole_and_writable(tmp_path):
    """Small tensors travel inside the control message, larger ones in the ring (copied,
    or read in place from 64 KiB): on either side of each boundary a model gets whole,
    writable inputs and its outputs come back whole."""
    from naiad_wire.interprocess.messages import INLINE_BYTES
    from naiad_wire.interprocess.shm_ring import ZERO_COPY_BYTES

    (tmp_path / "increment" / "1").mkdir(parents=True)
    (tmp_path / "increment" / "1" / "model.py").write_text(INCREMENT_MODEL)
    (tmp_path / "increment" / "config.pbtxt").write_text(
        'name: "increment"\nbackend: "python"\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "S" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "T" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
    )
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        rng = np.random.default_rng(1)
        byte_sizes = (0, 4, INLINE_BYTES - 4, INLINE_BYTES, INLINE_BYTES + 4, ZERO_COPY_BYTES, 2 * ZERO_COPY_BYTES)
        for size in byte_sizes:
            x = rng.standard_normal(size // 4).astype(np.float32)
            # BYTES elements carry a 4-byte length each: one element of size - 4 bytes makes
            # the encoded tensor exactly `size` bytes.
            words = bytes_array(rng.bytes(max(size - 4, 0)))
            response = server.infer("increment", {"X": x, "S": words})
            np.testing.assert_array_equal(response.output("Y").data, x + 1)
            assert list(response.output("T").data) == list(words)
    finally:
        server.close()


def test_a_missing_model_file_is_named_inside_the_model_directory(tmp_path):
    """A config override can point a model at a file it does not have (another backend, a
    default_model_filename); the refusal named the file by its absolute path, which tells a
    load API caller where the repository lives (found by tests/security/test_fuzz.py)."""
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(
        'backend: "python" input [{name: "X" data_type: TYPE_FP32 dims: [1]}] '
        'output [{name: "Y" data_type: TYPE_FP32 dims: [1]}]'
    )
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)], model_control_mode="explicit"))
    try:
        with pytest.raises(NaiadError) as caught:
            override = {
                "backend": "python",
                "default_model_filename": "other.py",
                "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [1]}],
                "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [1]}],
            }
            server.run(server.server.load_model("m", config=override))
        assert caught.value.code is ErrorCode.INVALID_ARG
        assert caught.value.message == "model 'm': model file '1/other.py' does not exist in the model's directory"
        assert str(tmp_path) not in caught.value.message
    finally:
        server.close()
