"""Ragged batches in every framework backend, through tritonclient: an `allow_ragged_batch`
input loads against a model that takes it flat ([-1]), requests of different lengths
share one batch, and each `batch_input` kind describes that batch as Triton defines it."""

from __future__ import annotations

import asyncio
import importlib.util

import numpy as np
import pytest
import tritonclient.http.aio as httpaio
from ragged_models import write_ragged_models

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
LENGTHS = (3, 4, 5)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("framework-ragged")
    write_ragged_models(repo, FRAMEWORKS, batch_size=len(LENGTHS))
    with ServerProcess(repo, timeout=300) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_requests_of_different_lengths_share_a_batch_described_by_batch_inputs(server, framework):
    model = f"{framework}_ragged"

    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:

            async def one(length: int) -> dict[str, int | float]:
                data = np.arange(1, length + 1, dtype=np.float32).reshape(1, length) * length
                tensor = httpaio.InferInput("INPUT", [1, length], "FP32")
                tensor.set_data_from_numpy(data)
                result = await client.infer(model, [tensor])
                answer = {}
                for name in ("SUM", "COUNT", "START", "END", "MAX", "ITEM", "FLAT"):
                    value = result.as_numpy(name)
                    assert value.shape == (1, 1), (name, value.shape)
                    answer[name] = value.item()
                answer["expected_sum"] = float(data.sum())
                return answer

            # The three make the preferred batch of 3 (the queue delay is 10 s): one execution.
            answers = await asyncio.wait_for(asyncio.gather(*(one(n) for n in LENGTHS)), 8)
            stats = (await client.get_inference_statistics(model))["model_stats"][0]
            assert {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]} == {3: 1}
        finally:
            await client.close()
        for length, answer in zip(LENGTHS, answers):
            assert answer["SUM"] == pytest.approx(answer["expected_sum"])
            assert answer["COUNT"] == length and answer["END"] - answer["START"] == length
            assert answer["ITEM"] == length and answer["FLAT"] == length
            assert answer["MAX"] == max(LENGTHS)
        # The requests' elements lie back to back in queue order, from 0 to the total.
        spans = sorted((a["START"], a["END"]) for a in answers)
        assert spans[0][0] == 0 and spans[-1][1] == sum(LENGTHS)
        assert all(left[1] == right[0] for left, right in zip(spans, spans[1:]))

    asyncio.run(go())
