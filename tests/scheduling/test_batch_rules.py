"""The dynamic batcher's rules (scheduling/batch_policy.py) as Triton applies them, seen
through tritonclient: when a batch goes, and where it ends.

Timings are of behaviour ("at once" against "after a delay of seconds"), with margins of
seconds; where requests must pile up, a slow model holds the only instance while the
test fills the queue, and the test waits on what the server reports, not on a clock."""

from __future__ import annotations

import asyncio
import os
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http.aio as httpaio

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent

DELAY_S = 3


def _config(dynamic_batching: str, op: str = "identity", extra_parameters: str = "") -> str:
    return f'''backend: "numpy" max_batch_size: 8
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
parameters [{{key:"op" value {{string_value:"{op}"}}}} {extra_parameters}]
dynamic_batching {{ {dynamic_batching} }}'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("batch-rules")
    started = repo / "slow-started"
    delay_us = DELAY_S * 1_000_000
    models = {
        "preferred_4_6": _config(f"preferred_batch_size: [4, 6] max_queue_delay_microseconds: {delay_us}"),
        "preferred_2_6": _config(f"preferred_batch_size: [2, 6] max_queue_delay_microseconds: {delay_us}"),
        # Each execution takes 2.5 s; queued requests wait 0.2 s at most for company.
        "slow_preferred_2": _config(
            "preferred_batch_size: [2] max_queue_delay_microseconds: 200000",
            op="sleep",
            extra_parameters=f''', {{key:"sleep_ms" value {{string_value:"2500"}}}},
            {{key:"started_file" value {{string_value:"{started}"}}}}''',
        ),
    }
    # Four slots; a batch waits (up to the delay) until half of them have a request ready.
    models["half_full"] = f"""backend: "numpy" max_batch_size: 4
input [{{name:"INPUT" data_type: TYPE_INT32 dims:[1]}}]
output [{{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}}, {{name:"CONTROLS" data_type: TYPE_INT32 dims:[3]}},
        {{name:"CORRID_OUT" data_type: TYPE_UINT64 dims:[1]}}]
parameters {{key:"op" value {{string_value:"accumulate"}}}}
sequence_batching {{
  direct {{ max_queue_delay_microseconds: {delay_us} minimum_slot_utilization: 0.5 }}
  control_input [
    {{name: "START" control [{{kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1]}}]}},
    {{name: "END" control [{{kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1]}}]}},
    {{name: "READY" control [{{kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1]}}]}},
    {{name: "CORRID" control [{{kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64}}]}}]
}}"""
    for name, config in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    with ServerProcess(
        repo, "--backend-plugin", "numpy_backend:NumpyPlugin", env={"PYTHONPATH": pythonpath}
    ) as process:
        process.slow_started = started
        yield process
        assert "Traceback" not in process.log(), process.log()


def _rows(count: int, value: float = 1.0) -> list:
    tensor = httpaio.InferInput("INPUT0", [count, 1], "FP32")
    tensor.set_data_from_numpy(np.full((count, 1), value, np.float32))
    return [tensor]


async def _timed(client, model: str, rows: int, value: float = 1.0) -> tuple[float, np.ndarray]:
    """Seconds from sending to the answer, and the answer (checked against the input)."""
    loop = asyncio.get_running_loop()
    sent = loop.time()
    result = await client.infer(model, _rows(rows, value))
    output = result.as_numpy("OUTPUT0")
    np.testing.assert_array_equal(output, np.full((rows, 1), value, np.float32))
    return loop.time() - sent, output


def _pending(server, model: str) -> int:
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    match = re.search(rf'^nv_inference_pending_request_count{{[^}}]*model="{model}"[^}}]*}} (\S+)$', text, re.M)
    return int(float(match.group(1))) if match else 0


async def _until(condition, what: str, limit: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not condition():
        assert loop.time() < deadline, f"gave up waiting until {what}"
        await asyncio.sleep(0.02)


async def _batch_sizes(client, model: str) -> dict[int, int]:
    stats = (await client.get_inference_statistics(model))["model_stats"][0]
    return {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}


def test_a_batch_at_a_preferred_size_goes_at_once_and_another_waits_the_delay(server):
    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:
            # 4 is a preferred size and nothing else is queued: no reason to wait.
            elapsed, _ = await _timed(client, "preferred_4_6", 4)
            assert elapsed < DELAY_S / 2, f"a batch of preferred size 4 waited {elapsed:.1f}s"
            # 5 is none: it waits the whole delay for company that never comes.
            elapsed, _ = await _timed(client, "preferred_4_6", 5)
            assert elapsed >= DELAY_S - 0.1, f"a batch of 5 was sent after {elapsed:.1f}s"
            assert await _batch_sizes(client, "preferred_4_6") == {4: 1, 5: 1}
        finally:
            await client.close()

    asyncio.run(go())


def test_a_request_that_would_pass_the_largest_preferred_size_ends_the_batch(server):
    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:
            three = asyncio.ensure_future(_timed(client, "preferred_2_6", 3, 3.0))
            await _until(lambda: _pending(server, "preferred_2_6") == 1, "the batch of 3 is queued")
            loop = asyncio.get_running_loop()
            four_sent = loop.time()
            four = asyncio.ensure_future(_timed(client, "preferred_2_6", 4, 4.0))
            await three
            # 3 + 4 = 7 passes the largest preferred size (6): the 3 goes alone, at once.
            assert loop.time() - four_sent < DELAY_S / 2
            # Alone, 4 is no preferred size: it waits its own delay.
            four_elapsed, _ = await four
            assert four_elapsed >= DELAY_S - 0.1, f"the batch of 4 was sent after {four_elapsed:.1f}s"
            assert await _batch_sizes(client, "preferred_2_6") == {3: 1, 4: 1}
        finally:
            await client.close()

    asyncio.run(go())


def test_after_the_delay_a_batch_grows_past_the_preferred_size_up_to_max_batch_size(server):
    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:
            # A preferred batch of 2 takes the only instance for 2.5 s.
            blocker = asyncio.ensure_future(_timed(client, "slow_preferred_2", 2))
            await _until(server.slow_started.exists, "the slow model runs")
            singles = [asyncio.ensure_future(_timed(client, "slow_preferred_2", 1, float(i))) for i in range(10)]
            await _until(lambda: _pending(server, "slow_preferred_2") == 10, "ten requests are queued")
            await blocker
            await asyncio.gather(*singles)
            # When the instance came free the ten had waited past the delay: the batch took
            # as many as max_batch_size allows (8, past the preferred 2); the last two
            # make a preferred batch.
            assert await _batch_sizes(client, "slow_preferred_2") == {2: 2, 8: 1}
        finally:
            await client.close()

    asyncio.run(go())


async def _sequence_step(client, value: int, sequence_id: int, start: bool = False) -> tuple[float, int]:
    tensor = httpaio.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], np.int32))
    loop = asyncio.get_running_loop()
    sent = loop.time()
    result = await client.infer("half_full", [tensor], sequence_id=sequence_id, sequence_start=start)
    return loop.time() - sent, int(result.as_numpy("OUTPUT").reshape(-1)[0])


def test_direct_sequences_wait_for_the_minimum_share_of_all_slots(server):
    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:
            # One ready slot of four is a quarter, under the minimum of a half: it waits the delay.
            elapsed, total = await _sequence_step(client, 1, 501, start=True)
            assert total == 1
            assert elapsed >= DELAY_S - 0.1, f"a quarter-full batch was sent after {elapsed:.1f}s"
            # Sequence 501 ready again: still a quarter (its slot is one of four), so it waits...
            first = asyncio.ensure_future(_sequence_step(client, 2, 501))
            await _until(lambda: _pending(server, "half_full") == 1, "sequence 501 waits")
            loop = asyncio.get_running_loop()
            second_sent = loop.time()
            # ...until a second sequence makes two of four: both go at once.
            second = await _sequence_step(client, 10, 502, start=True)
            await first
            assert loop.time() - second_sent < DELAY_S / 2
            assert second[1] == 10 and (await first)[1] == 3
        finally:
            await client.close()

    asyncio.run(go())
