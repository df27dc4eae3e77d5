"""The rate limiter (`--rate-limit execution_count`) seen through tritonclient: `naiad serve`
with the numpy test backend, whose models log each execution's start and end (`timing_log`)."""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent


def _config(root: Path, name: str, sleep_ms: int, rate_limiter: str, count: int) -> str:
    return f'''backend: "numpy" max_batch_size: 0
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
instance_group [{{kind: KIND_CPU count: {count} rate_limiter {{ {rate_limiter} }} }}]
parameters [{{key:"op" value {{string_value:"sleep"}}}}, {{key:"sleep_ms" value {{string_value:"{sleep_ms}"}}}},
            {{key:"timing_log" value {{string_value:"{root / f"{name}.log"}"}}}},
            {{key:"started_file" value {{string_value:"{root / f"{name}.started"}"}}}}]'''


def _repository(root: Path, models: dict[str, str], sleep_ms: int = 150, instances: int = 1) -> Path:
    """One model per name, each with the given rate_limiter body, logging its executions to
    root/NAME.log and touching root/NAME.started as one begins."""
    repo = root / "repo"
    for name, rate_limiter in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(_config(root, name, sleep_ms, rate_limiter, instances))
    return repo


def _serve(repo: Path, *flags: str) -> ServerProcess:
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return ServerProcess(repo, "--backend-plugin", "numpy_backend:NumpyPlugin", *flags, env={"PYTHONPATH": pythonpath})


def _executions(root: Path, name: str) -> list[tuple[float, float]]:
    return [(line["start"], line["end"]) for line in map(json.loads, (root / f"{name}.log").read_text().splitlines())]


def _infer_all(server: ServerProcess, requests: list[str]) -> None:
    """Sends every request (a model name each) at once, half over HTTP, half over gRPC."""

    def infer(index_and_model: tuple[int, str]) -> None:
        index, model = index_and_model
        module = httpclient if index % 2 else grpcclient
        client = module.InferenceServerClient(server.http_url if index % 2 else server.grpc_url)
        tensor = module.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.array([index], np.float32))
        assert client.infer(model, [tensor]).as_numpy("OUTPUT0").tolist() == [index]
        client.close()

    with ThreadPoolExecutor(len(requests)) as pool:
        list(pool.map(infer, enumerate(requests)))


def _overlaps(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return any(start_a < end_b and start_b < end_a for start_a, end_a in a for start_b, end_b in b)


@pytest.mark.parametrize(
    "flags, resource, limited",
    [
        (("--rate-limit", "EXECUTION_COUNT"), 'name: "R" count: 1', True),
        (("--rate-limit", "execution_count", "--rate-limit-resource", "R:1:0"), 'name: "R" count: 1', True),
        (("--rate-limit", "execution_count", "--rate-limit-resource", "R:1"), 'name: "R" global: true count: 1', True),
        ((), 'name: "R" count: 1', False),
        (("--rate-limit", "off"), 'name: "R" count: 1', False),
    ],
)
def test_models_sharing_a_resource_never_run_at_once(tmp_path, flags, resource, limited):
    repo = _repository(tmp_path, {"left": f"resources [{{{resource}}}]", "right": f"resources [{{{resource}}}]"})
    with _serve(repo, *flags) as server:
        _infer_all(server, ["left", "right"] * 3)
        left, right = _executions(tmp_path, "left"), _executions(tmp_path, "right")
        assert len(left) == len(right) == 3
        assert _overlaps(left, right) is not limited
        assert re.search(r"\| rate_limit +\| %s +\|" % ("EXEC_COUNT" if limited else "OFF"), server.log())
        assert "has no effect" not in server.log()


def test_fewest_executions_times_priority_goes_first(tmp_path):
    """`often` (priority 1) and `seldom` (priority 3), two instances each, all waiting for R
    while `blocker` holds it: an instance's turn comes by its executions times its priority,
    so once every instance has run once, `often`'s instances run twice more each before
    `seldom`'s run again."""
    _repository(tmp_path, {"blocker": 'resources [{name: "R" count: 1}]'}, sleep_ms=1000)
    repo = _repository(
        tmp_path,
        {
            "often": 'resources [{name: "R" count: 1}] priority: 1',
            "seldom": 'resources [{name: "R" count: 1}] priority: 3',
        },
        instances=2,
    )
    with _serve(repo, "--rate-limit", "execution_count") as server, ThreadPoolExecutor(1) as pool:
        blocked = pool.submit(_infer_all, server, ["blocker"])
        deadline = time.monotonic() + 10
        while not (tmp_path / "blocker.started").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        _infer_all(server, ["often", "seldom"] * 8)
        blocked.result()
    blocker = _executions(tmp_path, "blocker")
    runs = sorted(
        [(start, "often") for start, _ in _executions(tmp_path, "often")]
        + [(start, "seldom") for start, _ in _executions(tmp_path, "seldom")]
    )
    assert runs[0][0] >= blocker[0][1]  # all waited for the blocker
    order = [name for _, name in runs]
    assert sorted(order[:4]) == ["often", "often", "seldom", "seldom"], order
    assert order[4:8] == ["often"] * 4, order
    assert order[-4:] == ["seldom"] * 4, order


def test_a_config_asking_for_more_than_there_is_fails_its_load(tmp_path):
    repo = _repository(
        tmp_path, {"small": 'resources [{name: "R" count: 1}]', "greedy": 'resources [{name: "R" count: 2}]'}
    )
    flags = ("--model-control-mode", "explicit", "--rate-limit", "execution_count", "--rate-limit-resource", "R:1")
    with _serve(repo, *flags) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        client.load_model("small")
        with pytest.raises(InferenceServerException) as info:
            client.load_model("greedy")
        assert (
            'Resource count for "R" is limited to 1 which will prevent scheduling of one or more model '
            "instances, the minimum required count is 2"
        ) in info.value.message()
        assert not client.is_model_ready("greedy")
        # The server keeps serving, and the failed model holds nothing.
        _infer_all(server, ["small"])
        client.close()


def test_a_resource_both_global_and_per_device_fails_the_load(tmp_path):
    repo = _repository(
        tmp_path,
        {"device": 'resources [{name: "R" count: 1}]', "everywhere": 'resources [{name: "R" global: true count: 1}]'},
    )
    with _serve(repo, "--model-control-mode", "explicit", "--rate-limit", "execution_count") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.load_model("device")
        with pytest.raises(InferenceServerException) as info:
            client.load_model("everywhere")
        assert (
            'Resource "R" is present as both global and device-specific resource in the model configuration.'
            in info.value.message()
        )
        client.close()


def test_the_limiter_off_ignores_the_config(tmp_path):
    repo = _repository(tmp_path, {"greedy": 'resources [{name: "R" count: 2}]'})
    with _serve(repo, "--rate-limit-resource", "R:1:0", "--rate-limit-resource", "Q:3") as server:
        _infer_all(server, ["greedy"])
        assert "has no effect" not in server.log()
        # The start-up table lists the resources as tritonserver does, by name.
        assert re.search(r'\| rate_limit_resource\[0\] +\| {"name":"Q", "count":3 "device":-1} +\|', server.log())
        assert re.search(r'\| rate_limit_resource\[1\] +\| {"name":"R", "count":1 "device":0} +\|', server.log())


@pytest.mark.parametrize(
    "flags, words",
    [
        (("--rate-limit", "sometimes"), "invalid argument for --rate-limit"),
        (
            ("--rate-limit-resource", "R"),
            "--rate-limit-resource option format is '<resource_name>:<count>:<device>' "
            "or '<resource_name>:<count>'. Got R",
        ),
        (("--rate-limit-resource", "R:many"), "Invalid option value. Got R:many"),
    ],
)
def test_bad_rate_limit_flags_are_refused(tmp_path, flags, words):
    (tmp_path / "repo").mkdir()
    server = _serve(tmp_path / "repo", *flags)
    with pytest.raises(RuntimeError):
        server.start()
    assert words in server.log()
