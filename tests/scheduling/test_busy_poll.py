"""busy_poll: the loop stays awake (no sleep in epoll_wait) while a short batch runs and after
its answers, so a result and the next request find it awake; batches longer than the window
get no polling. Measured with the loop thread's own count of voluntary context switches
(each sleep in epoll_wait is one), with real InstanceRunners on real event loops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop

from naiad import InferenceRequest, InferenceResponse
from naiad.backend import InstanceContext, Model, ModelContext, ModelInstance
from naiad.config.model_config import parse_config_text, validate_config
from naiad.observability.statistics import ModelStatistics
from naiad.scheduling import busy_poll
from naiad.scheduling.instance_runner import InstanceRunner
from naiad.scheduling.job import Job

CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 8\n'


@pytest.fixture
def window_us() -> Iterator[int]:
    busy_poll.configure(300)
    try:
        yield 300
    finally:
        busy_poll.configure(0)


class _ThreadAnswered(ModelInstance):
    """A synchronous `execute`: it runs on the instance's own thread (as a framework
    backend's does), and the loop waits for the wake-up that brings its result."""

    delay_s = 0.0

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return [InferenceResponse(outputs=list(r.inputs)) for r in requests]


class _Model(Model):
    def create_instance(self, context: InstanceContext) -> ModelInstance:
        return _ThreadAnswered(self, context)


def _runner(delay_s: float) -> InstanceRunner:
    config = validate_config(parse_config_text(CONFIG, "m"), "m")
    here = Path(".")
    model = _Model(ModelContext("m", 1, here, here / "1", config))
    instance = model.create_instance(InstanceContext("m_0", "CPU", 0, 0, "m"))
    instance.delay_s = delay_s  # type: ignore[attr-defined]
    return InstanceRunner(instance, ModelStatistics("m", "1"), "m", "1", decoupled=False)


def _voluntary_switches() -> int:
    with open("/proc/thread-self/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/thread-self/status")


async def _batches(runner: InstanceRunner, count: int) -> tuple[int, int]:
    """The loop thread's sleeps over `count` batches, and how many batches polled."""
    polled = 0
    before = _voluntary_switches()
    for i in range(count):
        job = Job(InferenceRequest(model_name="m", inputs=[], id=str(i)), 1, lambda response: None)
        task = asyncio.ensure_future(runner.run([job]))
        await asyncio.sleep(0)  # the batch has started
        polled += busy_poll.polling(asyncio.get_running_loop())
        await task
        # Past the window: the next batch starts from a loop that went to sleep.
        await asyncio.sleep(0.002)
    return _voluntary_switches() - before, polled


@pytest.mark.parametrize("new_loop", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"])
def test_the_loop_does_not_sleep_while_a_short_batch_runs(window_us, new_loop):
    # Answered from the instance's thread after 30 us: well within the 300 us window (a busy
    # machine may still push a few batches past it).
    loop = new_loop()
    try:
        polled_sleeps, polled = loop.run_until_complete(_batches(_runner(30e-6), 100))
        busy_poll.configure(0)
        plain_sleeps, plain_polled = loop.run_until_complete(_batches(_runner(30e-6), 100))
    finally:
        loop.close()
    print(f"loop sleeps over 100 batches: {polled_sleeps} polling ({polled} polled), {plain_sleeps} not")
    assert polled >= 90 and plain_polled == 0, polled
    # Each batch without polling sleeps once for its result and once in the pause after it;
    # with polling, the result finds the loop awake.
    assert plain_sleeps >= 180, plain_sleeps
    assert polled_sleeps <= plain_sleeps - 40, (polled_sleeps, plain_sleeps)


def test_batches_longer_than_the_window_get_no_polling(window_us):
    async def go() -> tuple[int, int]:
        runner = _runner(0.002)  # 2 ms: far past the window
        await _batches(runner, 5)  # the first batches teach it how long a batch takes
        return await _batches(runner, 20)

    loop = uvloop.new_event_loop()
    try:
        _, polled = loop.run_until_complete(go())
    finally:
        loop.close()
    assert polled == 0


def test_polling_ends_with_its_window_and_costs_nothing_when_off(window_us):
    async def go() -> tuple[bool, bool, bool]:
        loop = asyncio.get_running_loop()
        busy_poll.hold(loop)
        during = busy_poll.polling(loop)
        await asyncio.sleep(0.005)  # ten windows
        after = busy_poll.polling(loop)
        busy_poll.configure(0)
        busy_poll.hold(loop)
        return during, after, busy_poll.polling(loop)

    assert asyncio.run(go()) == (True, False, False)


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError, match="0 or more microseconds"):
        busy_poll.configure(-1)
    assert busy_poll.window_ns() == 0
