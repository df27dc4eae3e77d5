"""One batching rule timed end to end: through tritonclient, a server process and the real
clock, a batch of a preferred size goes at once and another waits the queue delay.

Every other timing rule is checked in-process on a clock the test moves
(test_batch_rules.py, test_queue_timeouts.py); this test shows the real clock and timers
are wired to them. Its margins are seconds wide, so a loaded machine cannot fail it: the
delay is a lower bound the server cannot beat however fast it is, and "at once" means
within half the delay."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http.aio as httpaio

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent

DELAY_S = 3

CONFIG = f"""backend: "numpy" max_batch_size: 8
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
parameters [{{key:"op" value {{string_value:"identity"}}}}]
dynamic_batching {{ preferred_batch_size: [4, 6] max_queue_delay_microseconds: {DELAY_S * 1_000_000} }}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("batch-delay")
    (repo / "preferred_4_6" / "1").mkdir(parents=True)
    (repo / "preferred_4_6" / "config.pbtxt").write_text(CONFIG)
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    with ServerProcess(
        repo, "--backend-plugin", "numpy_backend:NumpyPlugin", env={"PYTHONPATH": pythonpath}
    ) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


async def _timed(client, rows: int) -> float:
    """Seconds from sending a batch of `rows` to its answer (checked against the input)."""
    tensor = httpaio.InferInput("INPUT0", [rows, 1], "FP32")
    values = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    tensor.set_data_from_numpy(values)
    loop = asyncio.get_running_loop()
    sent = loop.time()
    result = await client.infer("preferred_4_6", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values)
    return loop.time() - sent


@pytest.mark.slow
def test_a_batch_at_a_preferred_size_goes_at_once_and_another_waits_the_delay(server):
    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:
            # 4 is a preferred size and nothing else is queued: no reason to wait.
            elapsed = await _timed(client, 4)
            assert elapsed < DELAY_S / 2, f"a batch of preferred size 4 waited {elapsed:.1f}s"
            # 5 is none: it waits the whole delay for company that never comes.
            elapsed = await _timed(client, 5)
            assert elapsed >= DELAY_S - 0.1, f"a batch of 5 was sent after {elapsed:.1f}s"
            stats = (await client.get_inference_statistics("preferred_4_6"))["model_stats"][0]
            sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
            assert sizes == {4: 1, 5: 1}
        finally:
            await client.close()

    asyncio.run(go())
