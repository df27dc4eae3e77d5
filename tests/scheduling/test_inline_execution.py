"""Short batches of a backend that allows it run on the event loop; everything else keeps
the instance thread (backend ABI 1.2, `ModelInstance.runs_on_any_thread`)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest

from naiad import (
    Backend,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    NaiadError,
    Server,
    ServerOptions,
    Tensor,
    hookimpl,
)
from naiad.cache.response_cache import CacheSpec
from naiad.observability.trace_settings import TraceSetting, TraceSettings
from naiad.scheduling.inline_execution import InlineExecution

CONFIG = """name: "{name}"
backend: "threads"
max_batch_size: 8
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
parameters {{ key: "sleep_ms" value {{ string_value: "{sleep_ms}" }} }}
{extra}
"""


class ThreadRecordingInstance(ModelInstance):
    """Identity on X, remembering the thread of every execution; `sleep_ms` makes each
    execution long, a negative X makes it fail."""

    def initialize(self) -> None:
        self.threads: list[str] = []

    def execute(self, requests):
        self.threads.append(threading.current_thread().name)
        sleep_ms = int(self.model.context.config.parameter("sleep_ms", "0"))
        if sleep_ms:
            time.sleep(sleep_ms / 1000)
        responses = []
        for request in requests:
            x = request.inputs[0].data
            if (x < 0).any():
                responses.append(InferenceResponse(error=NaiadError.invalid("negative input")))
            else:
                responses.append(InferenceResponse(outputs=[Tensor.from_numpy("Y", x)]))
        return responses


class AnyThreadInstance(ThreadRecordingInstance):
    runs_on_any_thread = True


class ThreadsModel(Model):
    def create_instance(self, context):
        any_thread = self.context.config.bool_parameter("any_thread", False)
        return (AnyThreadInstance if any_thread else ThreadRecordingInstance)(self, context)


class ThreadsBackend(Backend):
    name = "threads"
    abi_version = (2, 0)

    def create_model(self, context):
        return ThreadsModel(context)


class ThreadsPlugin:
    @hookimpl
    def naiad_backends(self):
        return [ThreadsBackend]


def write(repo, name: str, any_thread: bool, sleep_ms: int = 0, extra: str = "") -> None:
    (repo / name / "1").mkdir(parents=True)
    flag = f'parameters {{ key: "any_thread" value {{ string_value: "{str(any_thread).lower()}" }} }}'
    (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name, sleep_ms=sleep_ms, extra=flag + "\n" + extra))


async def infer_sequentially(server: Server, name: str, count: int) -> None:
    for value in range(count):
        x = np.full((1, 1), value, np.float32)
        response = await server.infer(InferenceRequest(name, [Tensor.from_numpy("X", x)]))
        np.testing.assert_array_equal(response.outputs[0].data, x)


def threads_server(repo) -> Server:
    return Server(ServerOptions([str(repo)], backend_plugins=[ThreadsPlugin()], load_backend_entry_points=False))


def threads_of(server: Server, name: str) -> list[str]:
    return server.model(name).runners[0].instance.threads


@pytest.mark.parametrize("scheduler", ["", "dynamic_batching { }"])
def test_short_batches_of_an_any_thread_instance_run_on_the_loop(tmp_path, scheduler):
    write(tmp_path, "fast", any_thread=True, extra=scheduler)

    async def go():
        async with threads_server(tmp_path) as server:
            await infer_sequentially(server, "fast", 30)
            return threads_of(server, "fast"), threading.current_thread().name

    threads, loop_thread = asyncio.run(go())
    assert len(threads) == 30
    # The first batch is measured in the instance thread; then they come to the loop (on a
    # busy machine a preempted execution may send one back, so not every one is asserted).
    assert threads[0] != loop_thread
    assert threads[10:].count(loop_thread) >= 10, threads


def test_an_instance_that_does_not_allow_it_always_runs_in_its_thread(tmp_path):
    write(tmp_path, "affine", any_thread=False)

    async def go():
        async with threads_server(tmp_path) as server:
            await infer_sequentially(server, "affine", 10)
            return threads_of(server, "affine"), threading.current_thread().name

    threads, loop_thread = asyncio.run(go())
    assert len(threads) == 10 and loop_thread not in threads


def test_long_batches_stay_in_the_instance_thread(tmp_path):
    # 20 ms per execution is 200 times the inline budget.
    write(tmp_path, "slow", any_thread=True, sleep_ms=20)

    async def go():
        async with threads_server(tmp_path) as server:
            await infer_sequentially(server, "slow", 5)
            return threads_of(server, "slow"), threading.current_thread().name

    threads, loop_thread = asyncio.run(go())
    assert len(threads) == 5 and loop_thread not in threads


def test_a_lone_request_runs_on_the_loop_for_longer_unless_another_is_in_flight(tmp_path):
    # 1 ms per execution: ten times the budget of a batch that shares the server with other
    # requests, half the budget of one that holds every request in flight.
    write(tmp_path, "medium", any_thread=True, sleep_ms=1)
    write(tmp_path, "held", any_thread=False, sleep_ms=300)

    async def go():
        async with threads_server(tmp_path) as server:
            await infer_sequentially(server, "medium", 12)
            alone = list(threads_of(server, "medium"))
            held = asyncio.ensure_future(
                server.infer(InferenceRequest("held", [Tensor.from_numpy("X", np.ones((1, 1), np.float32))]))
            )
            await asyncio.sleep(0.05)  # "held" is executing: one more request in flight
            await infer_sequentially(server, "medium", 8)
            assert not held.done()
            await held
            return alone, threads_of(server, "medium")[12:], threading.current_thread().name

    alone, beside_another, loop_thread = asyncio.run(go())
    assert alone[0] != loop_thread
    assert alone[4:].count(loop_thread) >= 4, alone
    assert loop_thread not in beside_another


def test_errors_and_statistics_are_the_same_on_the_loop(tmp_path):
    write(tmp_path, "fast", any_thread=True)

    async def go():
        async with threads_server(tmp_path) as server:
            await infer_sequentially(server, "fast", 5)
            with pytest.raises(NaiadError, match="negative input"):
                await server.infer(InferenceRequest("fast", [Tensor.from_numpy("X", np.full((1, 1), -1, np.float32))]))
            await infer_sequentially(server, "fast", 1)
            stats = server.statistics("fast")[0]
            return threads_of(server, "fast"), threading.current_thread().name, stats

    threads, loop_thread, stats = asyncio.run(go())
    assert loop_thread in threads[1:]
    assert stats["inference_stats"]["success"]["count"] == 6
    assert stats["inference_stats"]["fail"]["count"] == 1
    assert stats["execution_count"] == 7


def test_cache_and_tracing_still_apply_to_batches_run_on_the_loop(tmp_path):
    repo = tmp_path / "models"
    write(repo, "cached", any_thread=True, extra="response_cache { enable: true }")
    trace_file = tmp_path / "trace.json"
    options = ServerOptions(
        [str(repo)],
        backend_plugins=[ThreadsPlugin()],
        load_backend_entry_points=False,
        cache=CacheSpec("local", {"size": "1048576"}),
        trace_settings=TraceSettings(TraceSetting(level=("TIMESTAMPS",), rate=1, file=str(trace_file))),
    )

    async def go():
        async with Server(options) as server:
            await infer_sequentially(server, "cached", 12)  # 12 different inputs: 12 executions
            await infer_sequentially(server, "cached", 12)  # the same again: 12 cache hits
            return threads_of(server, "cached"), threading.current_thread().name, server.statistics("cached")[0]

    threads, loop_thread, stats = asyncio.run(go())
    assert len(threads) == 12 and loop_thread in threads
    assert stats["inference_stats"]["cache_hit"]["count"] == 12
    assert stats["inference_stats"]["cache_miss"]["count"] == 12
    traces = json.loads(trace_file.read_text())
    executed = [t for t in traces if any(s["name"] == "COMPUTE_START" for s in t["timestamps"])]
    assert len(traces) == 24 and len(executed) == 12


def test_the_choice_follows_the_faster_of_the_last_two_measurements():
    choice = InlineExecution(budget_ns=100_000)
    assert not choice.choose(1)  # nothing measured yet
    choice.measured(1, 10_000)
    assert choice.choose(1)
    assert choice.choose(5)  # 5 x 10 us is still within the budget
    assert not choice.choose(10)  # 10 x 10 us is not
    choice.measured(10, 50_000)
    assert choice.choose(1)  # a smaller batch is never predicted to cost more
    choice.measured(1, 2_000_000)
    assert choice.choose(1)  # one long execution (a preemption) is forgiven...
    choice.measured(1, 2_000_000)
    assert not choice.choose(1)  # ...two are not
    choice.measured(1, 20_000)
    assert choice.choose(1)


def test_a_batch_alone_in_the_server_has_the_larger_budget():
    choice = InlineExecution(budget_ns=100_000, alone_budget_ns=2_000_000)
    choice.measured(1, 1_000_000)
    assert not choice.choose(1)
    assert choice.choose(1, alone=True)
    assert not choice.choose(4, alone=True)  # 4 x 1 ms is over it
