"""Model warmup: samples run on every instance at load, before the model is ready; a
failing sample fails the load in Triton's words."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from model_servers import executions, infer, model_config, server, statistics, write_model
from tritonclient.utils import InferenceServerException


def warmup(name: str, batch_size: int, inputs: str, count: int = 0) -> str:
    return f'model_warmup [{{ name: "{name}" batch_size: {batch_size} count: {count} {inputs} }}]\n'


def warm_input(key: str, data: str, dims: str = "[4]", datatype: str = "TYPE_FP32") -> str:
    return f'inputs {{ key: "{key}" value: {{ data_type: {datatype} dims: {dims} {data} }} }}'


def test_samples_run_on_every_instance_before_the_model_serves(tmp_path):
    log = tmp_path / "log"
    repo = tmp_path / "repo"
    inputs = (
        warm_input("INPUT0", "zero_data: true")
        + warm_input("INPUT1", "random_data: true")
        + warm_input("INPUT2", 'input_data_file: "raw"')
    )
    model = write_model(
        repo,
        "warm",
        model_config(
            "identity",
            log,
            max_batch_size=8,
            dims="[4]",
            cache=False,
            inputs=3,
            extra="instance_group [{kind: KIND_CPU count: 2}]\n" + warmup("sample one", 3, inputs, count=2),
        ),
    )
    (model / "warmup").mkdir()
    np.arange(4, dtype=np.float32).tofile(model / "warmup" / "raw")
    with server(repo) as process:
        ran = executions(log)
        # 2 instances x count 2, each execution a batch of batch_size requests.
        assert [e["requests"] for e in ran] == [3, 3, 3, 3]
        for execution in ran:
            assert execution["inputs"]["INPUT0"] == [0.0] * 4
            assert execution["inputs"]["INPUT2"] == [0.0, 1.0, 2.0, 3.0]
            assert len(execution["inputs"]["INPUT1"]) == 4
        # As in Triton, warmup requests count in the model's statistics.
        stats = statistics(process, "warm")
        assert stats["inference_count"] == 12 and stats["execution_count"] == 4
        assert stats["inference_stats"]["success"]["count"] == 12
        x = np.ones((1, 4), np.float32)
        np.testing.assert_array_equal(infer(process, "grpc", "warm", x, x, x)["OUTPUT0"], x)
        assert len(executions(log)) == 5
        assert "is running warmup sample 'sample one' for iteration 2" in process.log()


def test_a_model_is_loading_and_not_ready_while_it_warms_up(tmp_path):
    log = tmp_path / "log"
    repo = tmp_path / "repo"
    write_model(
        repo,
        "slow",
        model_config(
            "sleep",
            log,
            cache=False,
            dims="[2]",
            extra='parameters [{key:"sleep_ms" value {string_value:"1500"}}]\n'
            + warmup("slow sample", 1, warm_input("INPUT0", "zero_data: true", "[2]")),
        ),
    )
    with server(repo, "--model-control-mode", "explicit") as process:
        connection = httpclient.InferenceServerClient(process.http_url)
        loading = threading.Thread(target=connection.load_model, args=("slow",))
        loading.start()
        deadline = time.monotonic() + 10
        while not executions(log) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert executions(log), "warmup never started"
        probe = httpclient.InferenceServerClient(process.http_url)
        assert not probe.is_model_ready("slow")
        rows = {row["name"]: row for row in probe.get_model_repository_index()}
        assert rows["slow"]["state"] == "LOADING"
        loading.join(30)
        assert probe.is_model_ready("slow")
        assert {row["name"]: row for row in probe.get_model_repository_index()}["slow"]["state"] == "READY"


@pytest.mark.parametrize("module", [httpclient, grpcclient])
def test_a_failing_sample_fails_the_load_with_its_message(tmp_path, module):
    repo = tmp_path / "repo"
    write_model(
        repo,
        "failwarm",
        model_config(
            "fail",
            tmp_path / "log",
            cache=False,
            dims="[4]",
            extra=warmup("zero sample", 1, warm_input("INPUT0", "zero_data: true")),
        ),
    )
    with server(repo, "--model-control-mode", "explicit") as process:
        url = process.grpc_url if module is grpcclient else process.http_url
        connection = module.InferenceServerClient(url)
        with pytest.raises(InferenceServerException) as failure:
            connection.load_model("failwarm")
        assert (
            "failed to run warmup sample 'zero sample': model 'failwarm' failed to execute: RuntimeError: the "
            "model failed on purpose; "
        ) in str(failure.value)
        assert not connection.is_model_ready("failwarm")
        row = [
            r
            for r in httpclient.InferenceServerClient(process.http_url).get_model_repository_index()
            if r["name"] == "failwarm"
        ][0]
        assert row["state"] == "UNAVAILABLE" and "failed to run warmup sample 'zero sample'" in row["reason"]


@pytest.mark.parametrize(
    "inputs, words",
    [
        (
            warm_input("INPUT0", "zero_data: true", "[-1]"),
            "warmup setting expects all variable-size dimensions are specified for input 'INPUT0'",
        ),
        (
            warm_input("INPUT0", 'input_data_file: "../../config.pbtxt"'),
            "input_data_file '../../config.pbtxt' must be a relative path inside the model's warmup/ directory",
        ),
        (
            warm_input("INPUT0", 'input_data_file: "short"'),
            "warmup setting expects 16 bytes, but the data provided from short only has 3 bytes",
        ),
        (warm_input("INPUT0", ""), "warmup setting expects input 'INPUT0' to have input_data_type set"),
    ],
)
def test_a_sample_that_cannot_be_built_fails_the_load_naming_the_problem(tmp_path, inputs, words):
    repo = tmp_path / "repo"
    model = write_model(
        repo,
        "bad",
        model_config("identity", tmp_path / "log", cache=False, dims="[-1]", extra=warmup("bad sample", 1, inputs)),
    )
    (model / "warmup").mkdir()
    (model / "warmup" / "short").write_bytes(b"abc")
    with server(repo, "--model-control-mode", "explicit") as process:
        with pytest.raises(InferenceServerException) as failure:
            httpclient.InferenceServerClient(process.http_url).load_model("bad")
        assert words in str(failure.value)
        assert str(tmp_path) not in str(failure.value)


def test_bytes_inputs_warm_up_from_a_serialized_file_and_a_decoupled_model_warms_up(tmp_path):
    log = tmp_path / "log"
    repo = tmp_path / "repo"
    model = write_model(
        repo,
        "strings",
        model_config(
            "identity",
            log,
            cache=False,
            dims="[1]",
            datatype="TYPE_STRING",
            extra=warmup(
                "string sample", 2, warm_input("INPUT0", 'input_data_file: "raw_string"', "[1]", "TYPE_STRING")
            ),
        ),
    )
    (model / "warmup").mkdir()
    (model / "warmup" / "raw_string").write_bytes(b"\x03\x00\x00\x00233")
    write_model(
        repo,
        "repeat",
        """backend: "numpy" max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{name:"IN" data_type: TYPE_INT32 dims:[-1]}]
output [{name:"OUT" data_type: TYPE_INT32 dims:[1]},{name:"IDX" data_type: TYPE_UINT32 dims:[1]}]
parameters {key:"op" value {string_value:"repeat"}}
"""
        + warmup("decoupled sample", 1, warm_input("IN", "zero_data: true", "[3]", "TYPE_INT32")),
    )
    with server(repo) as process:
        assert executions(log) == [{"requests": 2, "inputs": {"INPUT0": ["233"]}}]
        assert "model 'repeat' instance" in process.log() and "warmup sample 'decoupled sample'" in process.log()
        assert httpclient.InferenceServerClient(process.http_url).is_model_ready("repeat")


def test_a_reload_whose_warmup_fails_leaves_the_serving_version_serving(tmp_path):
    repo = tmp_path / "repo"
    sample = warmup("zero sample", 1, warm_input("INPUT0", "zero_data: true"))
    write_model(repo, "model", model_config("identity", tmp_path / "log", cache=False, dims="[4]", extra=sample))
    with server(repo, "--model-control-mode", "explicit", "--load-model", "model") as process:
        connection = httpclient.InferenceServerClient(process.http_url)
        write_model(repo, "model", model_config("fail", tmp_path / "log", cache=False, dims="[4]", extra=sample))
        with pytest.raises(InferenceServerException, match="failed to run warmup sample 'zero sample'"):
            connection.load_model("model")
        x = np.arange(4, dtype=np.float32)
        np.testing.assert_array_equal(infer(process, "http", "model", x)["OUTPUT0"], x)
        assert connection.is_model_ready("model")
