"""busy_poll: the loop stays awake (no sleep in epoll_wait) while a short batch that it awaits
runs and after its answers, so a model process's result and the next request find it awake;
batches longer than the window, and an instance thread's batches, get no polling. Measured
with the loop thread's own count of voluntary context switches (each sleep in epoll_wait is
one), with real InstanceRunners on real event loops and a real child process answering."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvloop

from naiad import InferenceRequest, InferenceResponse
from naiad.backend import InstanceContext, Model, ModelContext, ModelInstance
from naiad.config.model_config import parse_config_text, validate_config
from naiad.observability.statistics import ModelStatistics
from naiad.scheduling.instance_runner import InstanceRunner
from naiad.scheduling.job import Job
from naiad_wire import busy_poll

CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 8\n'


@pytest.fixture
def window_us() -> Iterator[int]:
    busy_poll.configure(300)
    try:
        yield 300
    finally:
        busy_poll.configure(0)


class _ProcessAnswered(ModelInstance):
    """Each batch goes over a socket to a child process that answers it after `delay_s`, as a
    model's process does: the loop waits for the wake-up its answer brings."""

    def __init__(self, model: Model, context: InstanceContext, delay_s: float) -> None:
        super().__init__(model, context)
        self.sock, theirs = socket.socketpair()
        self.sock.setblocking(False)
        script = (
            "import socket, time\n"
            f"s = socket.socket(fileno={theirs.fileno()})\n"
            "while s.recv(1):\n"
            f"    time.sleep({delay_s})\n"
            "    s.send(b'.')\n"
        )
        self.child = subprocess.Popen([sys.executable, "-c", script], pass_fds=[theirs.fileno()])
        theirs.close()

    async def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(self.sock, b".")
        await loop.sock_recv(self.sock, 1)
        return [InferenceResponse(outputs=list(r.inputs)) for r in requests]

    def close(self) -> None:
        self.sock.close()
        self.child.wait(10)


class _ThreadRun(ModelInstance):
    """A synchronous `execute`: it runs on the instance's own thread."""

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        return [InferenceResponse(outputs=list(r.inputs)) for r in requests]


class _Model(Model):
    def create_instance(self, context: InstanceContext) -> ModelInstance:
        return _ThreadRun(self, context)


def _model() -> _Model:
    config = validate_config(parse_config_text(CONFIG, "m"), "m")
    here = Path(".")
    return _Model(ModelContext("m", 1, here, here / "1", config))


def _runner_of(instance: ModelInstance) -> InstanceRunner:
    return InstanceRunner(instance, ModelStatistics("m", "1"), "m", "1", decoupled=False)


@contextmanager
def _process_runner(delay_s: float) -> Iterator[InstanceRunner]:
    instance = _ProcessAnswered(_model(), InstanceContext("m_0", "CPU", 0, 0, "m"), delay_s)
    try:
        yield _runner_of(instance)
    finally:
        instance.close()


def _voluntary_switches() -> int:
    with open("/proc/thread-self/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/thread-self/status")


async def _batches(runner: InstanceRunner, count: int, pause_s: float) -> tuple[int, int]:
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
        await asyncio.sleep(pause_s)
    return _voluntary_switches() - before, polled


@pytest.mark.parametrize("new_loop", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"])
def test_the_loop_does_not_sleep_while_a_short_batch_runs(new_loop):
    # The child answers after 200 us, well within a 20 ms window: a window this wide keeps
    # the test true on a machine busy enough to delay the child's answer by milliseconds.
    busy_poll.configure(20_000)
    loop = new_loop()
    try:
        with _process_runner(0.0002) as runner:
            polled_sleeps, polled = loop.run_until_complete(_batches(runner, 40, 0.021))
            busy_poll.configure(0)
            plain_sleeps, plain_polled = loop.run_until_complete(_batches(runner, 40, 0.021))
    finally:
        loop.close()
        busy_poll.configure(0)
    print(f"loop sleeps over 40 batches: {polled_sleeps} polling ({polled} polled), {plain_sleeps} not")
    assert polled >= 36 and plain_polled == 0, polled  # a batch delayed past the window may not poll
    # Each batch without polling sleeps once for its result and once in the pause after it;
    # with polling, at most in the pause.
    assert plain_sleeps >= 50, plain_sleeps
    assert polled_sleeps <= plain_sleeps - 20, (polled_sleeps, plain_sleeps)


def test_batches_longer_than_the_window_get_no_polling(window_us):
    async def go(runner: InstanceRunner) -> tuple[int, int]:
        await _batches(runner, 5, 0.001)  # the first batches teach it how long a batch takes
        return await _batches(runner, 20, 0.001)

    loop = uvloop.new_event_loop()
    try:
        with _process_runner(0.002) as runner:  # 2 ms: far past the window
            _, polled = loop.run_until_complete(go(runner))
    finally:
        loop.close()
    assert polled == 0


def test_an_instance_threads_batches_get_no_polling(window_us):
    # The loop would contend for the GIL with the thread computing the batch.
    runner = _runner_of(_model().create_instance(InstanceContext("m_0", "CPU", 0, 0, "m")))
    loop = uvloop.new_event_loop()
    try:
        _, polled = loop.run_until_complete(_batches(runner, 10, 0.001))
    finally:
        runner.close()
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
