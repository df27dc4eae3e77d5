"""A model process's framework thread pools are sized to its share of the server's CPUs:
with two instances of a model.py, torch in each process takes half the CPUs (two pools of every
CPU, waiting by spinning, served a CNN 66 times slower on two CPUs); with one it keeps torch's
own default; a thread variable the server was started with is the operator's, and then
naiad sets neither. A GPU instance's process starts with its OpenMP threads passive."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from naiad_backend_python.server_side.backend import _process_count
from naiad_backend_python.server_side.settings import ModelSettings
from naiad_backend_python.server_side.stub_connection import StubLaunch, _stub_environment

from naiad.backend.helpers import gpu_ids
from naiad.config import parse_config_text, validate_config
from naiad.cpu_affinity import usable_cpu_count
from naiad.testing import ServerProcess

pytest.importorskip("torch")

# Answers what sized its process's pools: the variables, and the threads torch then uses.
THREADS_MODEL = """
import json
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        seen = json.dumps({
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
            "torch": torch.get_num_threads(),
            "pid": os.getpid(),
        })
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([seen.encode()], dtype=object))])
                for _ in requests]
"""

CONFIG = """
name: "{name}"
backend: "python"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ count: {count} kind: KIND_CPU }} ]
"""


def write_model(repo: Path, name: str, count: int) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name, count=count))
    (repo / name / "1" / "model.py").write_text(THREADS_MODEL)


def seen_by(client: httpclient.InferenceServerClient, model: str, requests: int = 8) -> list[dict]:
    """What each of `requests` sequential requests' processes reported."""
    answers = []
    for _ in range(requests):
        tensor = httpclient.InferInput("X", [1], "FP32")
        tensor.set_data_from_numpy(np.ones(1, dtype=np.float32))
        result = client.infer(model, [tensor])
        answers.append(json.loads(result.as_numpy("SEEN")[0]))
    return answers


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write_model(tmp_path, "two", 2)
    write_model(tmp_path, "one", 1)
    return tmp_path


def test_two_model_processes_share_the_servers_cpus_and_one_keeps_torchs_default(repo: Path) -> None:
    cpus = usable_cpu_count()
    share = str(max(1, cpus // 2))
    with ServerProcess(repo) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        two = seen_by(client, "two")
        one = seen_by(client, "one")
    for answer in two:
        assert answer["OMP_NUM_THREADS"] == share and answer["MKL_NUM_THREADS"] == share, answer
        assert answer["torch"] == int(share), answer
    # Without a limit below the machine's CPUs, one process keeps the framework's own choice.
    alone = None if cpus >= (os.cpu_count() or 0) else str(cpus)
    for answer in one:
        assert answer["OMP_NUM_THREADS"] == alone and answer["MKL_NUM_THREADS"] == alone, answer
    # A CPU instance's threads keep OpenMP's default way of waiting (they do its work).
    assert all(answer["OMP_WAIT_POLICY"] is None for answer in one + two)


def test_a_thread_variable_the_server_was_started_with_is_kept(repo: Path) -> None:
    with ServerProcess(repo, env={"OMP_NUM_THREADS": "1"}) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        answers = seen_by(client, "two")
    for answer in answers:
        # Both are the operator's: one set alone is not overruled through the other.
        assert answer["OMP_NUM_THREADS"] == "1" and answer["MKL_NUM_THREADS"] is None, answer
        assert answer["torch"] == 1, answer


@pytest.mark.parametrize(
    ("groups", "processes"),
    [
        ("", 1),
        ("instance_group [ { count: 3 kind: KIND_CPU } ]", 3),
        ("instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] }, { kind: KIND_CPU } ]", 5),
    ],
)
def test_the_processes_counted_are_those_the_groups_place(groups: str, processes: int) -> None:
    text = f'backend: "python" input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ] {groups}'
    assert _process_count(validate_config(parse_config_text(text, "m"), "m")) == processes


def test_a_gpu_group_without_a_list_counts_every_gpu_of_the_machine() -> None:
    text = 'backend: "python" input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] '
    text += "instance_group [ { count: 2 kind: KIND_GPU } ]"
    assert _process_count(validate_config(parse_config_text(text, "m"), "m")) == 2 * max(1, len(gpu_ids()))


@pytest.mark.parametrize(
    ("kind", "server_sets", "seen"),
    [("GPU", None, "PASSIVE"), ("CPU", None, None), ("GPU", "ACTIVE", "ACTIVE")],
    ids=["gpu", "cpu", "gpu-operator-set"],
)
def test_a_gpu_instances_process_waits_passively_unless_the_server_was_told_otherwise(
    kind: str, server_sets: str | None, seen: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The rule itself, here: a GPU instance cannot load on a machine without one
    # (tests/gpu/test_python_backend_gpu.py checks it in a real model process there).
    if server_sets is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", server_sets)
    settings = ModelSettings(
        in_process=False, inline=False, execute_timeout_s=0, python=sys.executable, env_dir=None,
        ring_bytes=1 << 20, start_timeout_s=30,
    )  # fmt: skip
    launch = StubLaunch(
        label="model 'm' instance 'm_0'",
        model_file=tmp_path / "model.py",
        args={"model_instance_kind": kind},
        decoupled=False,
        settings=settings,
        python_path=str(tmp_path),
        server=None,
    )
    assert _stub_environment(launch).get("OMP_WAIT_POLICY") == seen
