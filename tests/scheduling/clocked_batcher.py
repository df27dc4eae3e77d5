"""A batcher driven by hand, in-process: the real `DynamicBatcher` or `SequenceBatcher`
built from a `config.pbtxt` validated as at load, real `InstanceRunner`s, a `ManualClock`,
and a model whose instances record every batch they are given and stay busy while a test
holds them. Tests move the clock and look at the batches: no wall clock is waited for, so
a rule's timing is checked to the nanosecond on however loaded a machine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
from manual_clock import ManualClock, settle

from naiad import InferenceRequest, InferenceResponse, NaiadError, Tensor
from naiad.backend import InstanceContext, Model, ModelContext, ModelInstance
from naiad.config.model_config import ModelConfig, parse_config_text, validate_config
from naiad.observability.statistics import ModelStatistics
from naiad.scheduling.dynamic_batcher import DynamicBatcher
from naiad.scheduling.instance_runner import InstanceRunner
from naiad.scheduling.job import Job
from naiad.scheduling.scheduler import Scheduler
from naiad.scheduling.sequence_batcher import SequenceBatcher

__all__ = ["ClockedBatcher", "clocked_batcher", "MS", "US"]

US = 1_000
MS = 1_000_000


class _RecordingInstance(ModelInstance):
    """Answers each request with its own inputs, once `free` is set."""

    def __init__(self, model: Model, context: InstanceContext, batches: list[list[str]]) -> None:
        super().__init__(model, context)
        self.batches = batches
        self.free = asyncio.Event()
        self.free.set()

    async def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse]:
        # A sequence batcher's padding requests have no id: "" marks their places.
        self.batches.append([request.id for request in requests])
        await self.free.wait()
        return [InferenceResponse(outputs=list(request.inputs)) for request in requests]


class _RecordingModel(Model):
    def __init__(self, context: ModelContext) -> None:
        super().__init__(context)
        self.batches: list[list[str]] = []

    def create_instance(self, context: InstanceContext) -> ModelInstance:
        return _RecordingInstance(self, context, self.batches)


class ClockedBatcher:
    """One model's batcher, its instances and the answers it gave, by request id."""

    def __init__(self, config: ModelConfig, instances: int, clock: ManualClock) -> None:
        self.clock = clock
        self.config = config
        here = Path(".")
        self.model = _RecordingModel(ModelContext(config.name, 1, here, here / "1", config))
        statistics = ModelStatistics(config.name, "1")
        self.instances = [
            _RecordingInstance(
                self.model, InstanceContext(f"{config.name}_0_{i}", "CPU", 0, i, config.name), self.model.batches
            )
            for i in range(instances)
        ]
        self.runners = [
            InstanceRunner(instance, statistics, config.name, "1", decoupled=False) for instance in self.instances
        ]
        scheduler_class = SequenceBatcher if config.scheduling == "sequence_batching" else DynamicBatcher
        self.scheduler: Scheduler = scheduler_class(config, self.runners, clock=clock)
        self.answers: dict[str, InferenceResponse] = {}

    @property
    def batches(self) -> list[list[str]]:
        """The ids of each batch executed so far, in order of execution."""
        return self.model.batches

    def send(self, rid: str, rows: int = 1, **parameters: object) -> None:
        """Queue a request `rid` of `rows` rows of INPUT0 (the parameters Triton's clients
        send: priority, timeout, sequence_id, sequence_start, sequence_end), stamped now on
        the batcher's clock."""
        shape = (rows, 1) if self.config.max_batch_size > 0 else (1,)
        request = InferenceRequest(
            self.config.name, [Tensor.from_numpy("INPUT0", np.ones(shape, np.float32))], id=rid, parameters=parameters
        )
        request.take_control_parameters()
        self.scheduler.enqueue(
            Job(request, rows, lambda response: self._answered(rid, response), enqueued_ns=self.clock.monotonic_ns())
        )

    def _answered(self, rid: str, response: InferenceResponse) -> None:
        assert rid not in self.answers, f"request {rid} was answered twice"
        self.answers[rid] = response

    def error(self, rid: str) -> NaiadError:
        """The error request `rid` was answered with (fails when it was answered well)."""
        error = self.answers[rid].error
        assert error is not None, f"request {rid} was answered without an error"
        return error

    def hold(self) -> None:
        """Keep every instance busy with whatever it executes next (or now)."""
        for instance in self.instances:
            instance.free.clear()

    async def release(self) -> None:
        """Let the held executions finish, and the batcher act on the free instances."""
        for instance in self.instances:
            instance.free.set()
        await settle()


@asynccontextmanager
async def clocked_batcher(config_text: str, instances: int = 1) -> AsyncIterator[ClockedBatcher]:
    """The batcher of the model `config_text` describes (its name "m"), started, on a
    manual clock; stopped at the end."""
    config = validate_config(parse_config_text(config_text, "m"), "m")
    batcher = ClockedBatcher(config, instances, ManualClock())
    await batcher.scheduler.start()
    try:
        yield batcher
    finally:
        await batcher.release()
        await asyncio.wait_for(batcher.scheduler.stop(), 10)
