"""Sequence models in every framework backend, through tritonclient: the control inputs
(START, END, READY, CORRID) and the implicit state reach the model like its config inputs,
with and without a batch dimension, under the direct and the oldest strategy, for four
sequences at once."""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from sequence_models import write_sequence_models

from naiad.testing import ServerProcess

FRAMEWORKS = [
    name
    for name, module in (
        ("onnx", "naiad_backend_onnx"),
        ("pytorch", "naiad_backend_pytorch"),
        ("tensorflow", "naiad_backend_tensorflow"),
    )
    if importlib.util.find_spec(module) is not None
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("framework-sequences")
    names = write_sequence_models(repo, FRAMEWORKS)
    with ServerProcess(repo, timeout=300) as process:
        client = httpclient.InferenceServerClient(process.http_url)
        not_ready = [name for name in names if not client.is_model_ready(name)]
        assert not not_ready, process.log()
        yield process
        assert "Traceback" not in process.log(), process.log()


def _run_sequence(server, model: str, protocol: str, sequence_id: int, values: list[int]) -> list[tuple]:
    module = httpclient if protocol == "http" else grpcclient
    url = server.http_url if protocol == "http" else server.grpc_url
    client = module.InferenceServerClient(url)
    batching = "batching" in model
    answers = []
    for step, value in enumerate(values):
        data = np.array([[value]] if batching else [value], np.int32)
        tensor = module.InferInput("value" if model.startswith("pytorch") else "INPUT", list(data.shape), "INT32")
        tensor.set_data_from_numpy(data)
        result = client.infer(
            model, [tensor], sequence_id=sequence_id, sequence_start=step == 0, sequence_end=step == len(values) - 1
        )
        names = (
            ("OUTPUT__0", "FLAGS__1", "CORRID_OUT__2")
            if model.startswith("pytorch")
            else ("OUTPUT", "FLAGS", "CORRID_OUT")
        )
        outputs = [result.as_numpy(name) for name in names]
        assert all(o.shape == ((1, 1) if batching else (1,)) for o in outputs), [o.shape for o in outputs]
        # The state output is the model's business: it is not part of the answer.
        assert result.as_numpy("OUTPUT_STATE") is None and result.as_numpy("OUTPUT_STATE__3") is None
        answers.append(tuple(int(o.reshape(-1)[0]) for o in outputs))
    client.close()
    return answers


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("strategy", ["direct", "oldest"])
@pytest.mark.parametrize("batching", ["batching", "single"])
def test_four_concurrent_sequences_see_their_controls_and_state(server, framework, strategy, batching):
    model = f"{framework}_{strategy}_{batching}"
    sequences = {1000 + 10 * i: [i + 1, 10 * (i + 1), 100 * (i + 1)] for i in range(4)}
    with ThreadPoolExecutor(4) as pool:
        futures = {
            sequence_id: pool.submit(_run_sequence, server, model, "http" if i % 2 else "grpc", sequence_id, values)
            for i, (sequence_id, values) in enumerate(sequences.items())
        }
        results = {sequence_id: future.result(timeout=120) for sequence_id, future in futures.items()}
    for sequence_id, values in sequences.items():
        sums = np.cumsum(values).tolist()
        # START + 4 * READY, then READY, then 2 * END + 4 * READY.
        assert results[sequence_id] == [(sums[0], 5, sequence_id), (sums[1], 4, sequence_id), (sums[2], 6, sequence_id)]
