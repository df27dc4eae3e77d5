"""`sequence_batching { }`: stateful models that see every request of a sequence in order,
on the same instance.

A sequence is the run of requests sharing a correlation id (uint64 or string), from the
one flagged START to the one flagged END. Its first request binds it to a slot of one
instance; every later request goes to that slot, one request per execution, so a model
can keep per-sequence state (its own, or implicit state the batcher carries). When no
slot is free the sequence waits in a backlog until one is. The slot is released after
the END request executes, or when the sequence has been idle for
`max_sequence_idle_microseconds` (default 1 s), after which its id is unknown again.

Two strategies decide how slots make batches:

* `direct` (default): an instance has `max_batch_size` slots (1 without batching) and
  slot i is always position i of the batch; positions of slots with nothing ready are
  padded with a request whose READY control is false. With both
  `max_queue_delay_microseconds` and `minimum_slot_utilization` set, a batch waits until
  that share of the instance's slots (ready / max_batch_size) has a request ready, or the
  oldest ready request has waited the delay; with either unset (0) it goes at once.
* `oldest`: an instance holds up to `max_candidate_sequences` sequences and batches the
  oldest ready requests of different sequences like the dynamic batcher does
  (`preferred_batch_size`, `max_queue_delay_microseconds`, `preserve_ordering`).

Control inputs (START, END, READY, CORRID) and implicit state are added to each request
just before it executes.

With `iterative_sequence: true` a sequence is one request that the model runs over several
executions (Triton's iterative sequences, the way to continuous batching): a request
without a correlation id gets one here (and the START flag), the model asks for another
execution by setting `request.reschedule`, and the request then waits in its slot for the
next batch with START cleared, beside new sequences and other rescheduled ones. The
sequence ends, and frees its slot, when an execution leaves the request finished.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config.model_config import ModelConfig
from ..config.sequence_controls import SequenceControls
from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..tensor import Tensor
from .batch_compatibility import BatchSignature
from .batch_policy import BatchPolicy
from .clock import Cancellable, Clock, SystemClock, sleep_until
from .implicit_state import ImplicitState, StateValues
from .instance_runner import InstanceRunner
from .job import Job
from .loop_event import LoopEvent
from .response_ordering import ResponseOrdering
from .scheduler import Scheduler

__all__ = ["SequenceBatcher"]

_DEFAULT_IDLE_US = 1_000_000
# A time after every queue delay: what batch decisions are asked at shutdown.
_FLUSH = 2**63


@dataclass(eq=False)
class _Sequence:
    correlation_id: int | str
    # When a request of it last arrived or finished executing (the batcher's clock).
    last_seen_ns: int
    slot: _Slot | None = None
    pending: deque[Job] = field(default_factory=deque)
    state: StateValues = field(default_factory=dict)
    in_flight: bool = False
    # The END request is queued: only a new START may follow.
    ending: bool = False
    # Its (iterative) request is queued again after an execution: it is prepared already.
    rescheduled: bool = False
    # A queued request was cancelled, which ends the sequence (once its running request is done).
    cancelled: bool = False


@dataclass(eq=False)
class _Slot:
    worker: _InstanceWorker
    index: int
    sequence: _Sequence | None = None


class _InstanceWorker:
    """One instance's slots and the task that executes their requests."""

    def __init__(self, runner: InstanceRunner, slot_count: int) -> None:
        self.runner = runner
        self.slots = [_Slot(self, i) for i in range(slot_count)]
        # Waited on by this worker's task alone, on one loop (loop_event.py).
        self.changed = LoopEvent()
        self.task: asyncio.Task[None] | None = None

    def occupied(self) -> int:
        return sum(1 for slot in self.slots if slot.sequence is not None)

    def free_slot(self) -> _Slot | None:
        return next((slot for slot in self.slots if slot.sequence is None), None)


class SequenceBatcher(Scheduler):
    """The sequence batcher of one model version; `clock` is where it reads the time and
    sets its wake-ups (clock.py; the system's when not given)."""

    def __init__(self, config: ModelConfig, runners: list[InstanceRunner], clock: Clock | None = None) -> None:
        settings = config.proto.sequence_batching
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._config = config
        self._model_name = config.name
        self._batched = config.max_batch_size > 0
        self._controls = SequenceControls(config)
        self._state = ImplicitState(config, _model_dirs(runners))
        self._idle_ns = (settings.max_sequence_idle_microseconds or _DEFAULT_IDLE_US) * 1000
        self._iterative = settings.iterative_sequence
        # The correlation ids handed to iterative requests that come without one, as Triton's.
        self._assigned_ids = itertools.count(1)
        self._oldest = settings.WhichOneof("strategy_choice") == "oldest"
        if self._oldest:
            oldest = settings.oldest
            slot_count = max(oldest.max_candidate_sequences, 1)
            self._policy = BatchPolicy(
                max_batch_size=max(config.max_batch_size, 1),
                preferred_batch_sizes=tuple(sorted(set(oldest.preferred_batch_size))) if self._batched else (),
                max_queue_delay_ns=oldest.max_queue_delay_microseconds * 1000,
                signature=BatchSignature(config).of,
            )
            self._ordering = ResponseOrdering() if oldest.preserve_ordering else None
        else:
            slot_count = max(config.max_batch_size, 1)
            self._delay_ns = settings.direct.max_queue_delay_microseconds * 1000
            self._min_utilization = settings.direct.minimum_slot_utilization
            self._ordering = None
        self._workers = [_InstanceWorker(runner, slot_count) for runner in runners]
        self._sequences: dict[int | str, _Sequence] = {}
        self._backlog: deque[_Sequence] = deque()
        self._accepting = False
        self._reaper: asyncio.Task[None] | None = None

    # -- taking requests -------------------------------------------------------------------

    def enqueue(self, job: Job) -> None:
        try:
            self._admit(job)
        except NaiadError as error:
            job.reject(InferenceResponse(error=error))

    def _admit(self, job: Job) -> None:
        request = job.request
        model = f"model '{self._model_name}'"
        if not self._accepting:
            raise NaiadError.unavailable(f"{model} is not accepting requests")
        correlation_id = request.correlation_id
        if self._iterative and correlation_id in (0, "", None):
            correlation_id = request.correlation_id = self._new_correlation_id()
            request.sequence_start = True
        if correlation_id in (0, "") or correlation_id is None:
            raise NaiadError.invalid(
                f"inference request to {model} must specify a non-zero or non-empty correlation ID "
                "(sequence_id): the model uses the sequence batcher"
            )
        self._controls.check_correlation_id(correlation_id)
        if self._batched and job.batch_size != 1:
            raise NaiadError.invalid(
                f"inference request to {model} must specify batch-size 1 due to requirements of sequence "
                f"batcher (one request of a sequence runs at a time), got {job.batch_size}"
            )
        now = self._clock.monotonic_ns()
        sequence = self._sequences.get(correlation_id)
        if sequence is not None and self._is_idle(sequence, now):
            self._release(sequence)
            sequence = None
        if sequence is not None and self._iterative:
            raise NaiadError.invalid(
                f"inference request for sequence {correlation_id!r} to {model}: the sequence's request is still "
                "running (an iterative sequence is one request)"
            )
        if sequence is not None and sequence.ending and not request.sequence_start:
            raise NaiadError.invalid(
                f"inference request for sequence {correlation_id!r} to {model} follows the sequence's END "
                "request; start a new sequence with the START flag"
            )
        if sequence is None:
            if not request.sequence_start:
                raise NaiadError.invalid(
                    f"inference request for sequence {correlation_id!r} to {model} must specify the START flag "
                    "on the first request of the sequence (no active sequence has this correlation ID; it may "
                    "have ended or been released after max_sequence_idle_microseconds)"
                )
            sequence = _Sequence(correlation_id, now)
            self._sequences[correlation_id] = sequence
            self._assign_slot(sequence)
        sequence.ending = request.sequence_end
        sequence.last_seen_ns = now
        job.on_cancel = self._cancelled
        sequence.pending.append(job)
        if sequence.slot is not None:
            sequence.slot.worker.changed.set()

    def _new_correlation_id(self) -> int | str:
        """The next id no running sequence holds (a client may have chosen it), typed as
        the model's CORRID control takes it."""
        while True:
            number = next(self._assigned_ids)
            correlation_id = str(number) if self._controls.corrid_datatype == "BYTES" else number
            if correlation_id not in self._sequences:
                return correlation_id

    def _is_idle(self, sequence: _Sequence, now_ns: int) -> bool:
        return (
            not sequence.pending
            and not sequence.in_flight
            and sequence.slot is not None
            and now_ns - sequence.last_seen_ns > self._idle_ns
        )

    def _assign_slot(self, sequence: _Sequence) -> None:
        # The least occupied instance first, so sequences spread over instances.
        candidates = [w for w in self._workers if w.free_slot() is not None]
        if not candidates:
            self._backlog.append(sequence)
            return
        worker = min(candidates, key=lambda w: w.occupied())
        slot = worker.free_slot()
        assert slot is not None
        slot.sequence = sequence
        sequence.slot = slot

    def _release(self, sequence: _Sequence) -> None:
        """Forget `sequence` and give its slot to the longest-waiting backlog sequence."""
        if self._sequences.get(sequence.correlation_id) is sequence:
            del self._sequences[sequence.correlation_id]
        slot = sequence.slot
        sequence.slot = None
        if slot is None:
            return
        slot.sequence = None
        while self._backlog:
            waiting = self._backlog.popleft()
            if self._sequences.get(waiting.correlation_id) is not waiting:
                continue
            slot.sequence = waiting
            waiting.slot = slot
            slot.worker.changed.set()
            break

    def _cancelled(self, job: Job) -> None:
        """A queued request of a sequence was cancelled: as Triton, the whole sequence is
        (its other queued requests are answered as cancelled at once, and it ends); one
        running now ends once that execution is done."""
        sequence = self._sequences.get(job.request.correlation_id)  # type: ignore[arg-type]
        if sequence is None or job not in sequence.pending:
            return
        self._cancel_sequence(sequence)
        for worker in self._workers:
            worker.changed.set()

    def _cancel_sequence(self, sequence: _Sequence) -> None:
        while sequence.pending:
            sequence.pending.popleft().finish(InferenceResponse(error=NaiadError.cancelled_request()))
        sequence.cancelled = True
        # Its id is free at once: a new START begins another sequence, which gets this
        # sequence's slot when the request running in it is done.
        if self._sequences.get(sequence.correlation_id) is sequence:
            del self._sequences[sequence.correlation_id]
        if not sequence.in_flight:
            self._release(sequence)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._accepting = True
        for worker in self._workers:
            worker.task = asyncio.create_task(self._work(worker), name=f"naiad-sequence-{worker.runner.name}")
        self._reaper = asyncio.create_task(self._reap_idle())

    async def stop(self, timeout: float | None = None) -> None:
        self._accepting = False
        # Sequences still waiting for a slot would wait for sequences that may never end.
        while self._backlog:
            sequence = self._backlog.popleft()
            self._fail_pending(sequence, f"model '{self._model_name}' was unloaded")
            self._sequences.pop(sequence.correlation_id, None)
        for worker in self._workers:
            worker.changed.set()
        tasks = [w.task for w in self._workers if w.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
        if self._reaper is not None:
            self._reaper.cancel()
        for sequence in list(self._sequences.values()):
            self._fail_pending(sequence, f"model '{self._model_name}' was unloaded")
        self._sequences.clear()

    def _fail_pending(self, sequence: _Sequence, message: str) -> None:
        while sequence.pending:
            sequence.pending.popleft().reject(InferenceResponse(error=NaiadError.unavailable(message)))

    async def _reap_idle(self) -> None:
        """Release sequences that stopped sending requests, so their slots serve others."""
        interval_ns = min(self._idle_ns // 4, 1_000_000_000)
        while True:
            await sleep_until(self._clock, self._clock.monotonic_ns() + interval_ns)
            now = self._clock.monotonic_ns()
            for sequence in [s for s in self._sequences.values() if self._is_idle(s, now)]:
                self._release(sequence)

    # -- executing ---------------------------------------------------------------------------

    async def _work(self, worker: _InstanceWorker) -> None:
        clock = self._clock
        while True:
            self._drop_cancelled(worker)
            now = clock.monotonic_ns()
            # Once stopping, nothing waits for more requests: run what is pending.
            jobs, wake = self._form_batch(worker, now if self._accepting else _FLUSH)
            if jobs:
                await self._execute(worker, jobs)
                continue
            if not self._accepting and not any(s.sequence and s.sequence.pending for s in worker.slots):
                return
            worker.changed.clear()
            timer: Cancellable | None = clock.call_at(wake, worker.changed.set) if wake is not None else None
            await worker.changed.wait()
            if timer is not None:
                timer.cancel()

    def _drop_cancelled(self, worker: _InstanceWorker) -> None:
        for slot in worker.slots:
            sequence = slot.sequence
            if sequence is not None and any(job.request.cancelled for job in sequence.pending):
                self._cancel_sequence(sequence)

    def _form_batch(self, worker: _InstanceWorker, now_ns: int) -> tuple[list[tuple[_Slot, Job]], int | None]:
        ready = [slot for slot in worker.slots if slot.sequence is not None and slot.sequence.pending]
        if not ready:
            return [], None
        if self._oldest:
            heads = sorted((slot.sequence.pending[0] for slot in ready), key=lambda job: job.enqueued_ns)  # type: ignore[union-attr]
            slot_of = {id(slot.sequence.pending[0]): slot for slot in ready}  # type: ignore[union-attr]
            decision = self._policy.decide(heads, now_ns)
            return [(slot_of[id(job)], job) for job in decision.jobs], decision.wake_ns
        # direct, as Triton: with a delay and a minimum utilization both set, wait (at most
        # the delay after the oldest ready request arrived) until that share of all the
        # instance's slots, not only the occupied ones, has a request ready.
        if self._delay_ns and self._min_utilization:
            oldest = min(slot.sequence.pending[0].enqueued_ns for slot in ready)  # type: ignore[union-attr]
            send_at = oldest + self._delay_ns
            if now_ns < send_at and len(ready) / len(worker.slots) < self._min_utilization:
                return [], send_at
        return [(slot, slot.sequence.pending[0]) for slot in ready], None  # type: ignore[union-attr]

    async def _execute(self, worker: _InstanceWorker, chosen: list[tuple[_Slot, Job]]) -> None:
        sequences = [slot.sequence for slot, _ in chosen]
        for sequence in sequences:
            assert sequence is not None
            sequence.pending.popleft()
            sequence.in_flight = True
        again: list[Job] = []
        try:
            try:
                batch = self._assemble(chosen)
            except Exception as exc:  # noqa: BLE001 - fail these requests, keep the instance serving
                error = NaiadError.internal(
                    f"model '{self._model_name}': could not prepare sequence inputs: {type(exc).__name__}: {exc}"
                )
                for _, job in chosen:
                    job.finish(InferenceResponse(error=error))
                return
            again = await worker.runner.run(batch, reschedulable=self._iterative)
        finally:
            now = self._clock.monotonic_ns()
            for (_slot, job), sequence in zip(chosen, sequences):
                assert sequence is not None
                sequence.in_flight = False
                sequence.last_seen_ns = now
                if job in again:
                    # Triton clears the flags of a rescheduled request: it continues its sequence.
                    job.request.sequence_start = job.request.sequence_end = False
                    sequence.rescheduled = True
                    sequence.pending.append(job)
                elif self._iterative or sequence.cancelled or (job.request.sequence_end and not sequence.pending):
                    self._release(sequence)

    def _assemble(self, chosen: list[tuple[_Slot, Job]]) -> list[Job]:
        """The batch to execute: prepared requests, and (direct) padding in empty positions."""
        if self._oldest:
            return [self._prepare(slot, job) for slot, job in chosen]
        by_index = {slot.index: (slot, job) for slot, job in chosen}
        template = chosen[0][1].request
        return [
            self._prepare(*by_index[index]) if index in by_index else self._padding(template)
            for index in range(max(by_index) + 1)
        ]

    def _prepare(self, slot: _Slot, job: Job) -> Job:
        """Add control and state inputs; route state outputs back into the sequence."""
        sequence = slot.sequence
        assert sequence is not None
        request = job.request
        if request.sequence_start or not sequence.state:
            sequence.state = self._state.initial()
        added = self._controls.tensors(request.sequence_start, request.sequence_end, True, sequence.correlation_id)
        added += self._state.inputs(sequence.state)
        _put_inputs(request, added)
        if sequence.rescheduled:
            return job  # its responses are routed already
        if self._ordering is not None:
            self._ordering.track(job)
        if not self._state:
            return job
        deliver = job.deliver

        def deliver_with_state(response: InferenceResponse) -> None:
            self._state.capture(response, sequence.state)
            deliver(response)

        job.deliver = deliver_with_state
        return job

    def _padding(self, template: InferenceRequest) -> Job:
        """A not-READY request filling an empty slot's batch position (direct strategy)."""
        inputs = [
            Tensor(
                t.name,
                t.datatype,
                t.shape,
                np.zeros(t.shape, dtype=t.data.dtype)
                if t.data.dtype != object
                else np.full(t.shape, b"", dtype=object),
            )
            for t in template.inputs
        ]
        request = InferenceRequest(self._model_name, inputs)
        null_id = self._controls.null_correlation_id()
        added = self._controls.tensors(False, False, False, null_id) + self._state.inputs(self._state.initial())
        _put_inputs(request, added)
        return Job(request, 0, lambda response: None)


def _put_inputs(request: InferenceRequest, tensors: list[Tensor]) -> None:
    names = {t.name for t in tensors}
    request.inputs = [t for t in request.inputs if t.name not in names] + tensors


def _model_dirs(runners: list[InstanceRunner]) -> list[Path]:
    """Where `initial_state/` files may live: the model's directory (where Triton looks),
    then the version directory."""
    if not runners:
        return []
    context = runners[0].instance.model.context
    return [Path(context.path), Path(context.version_path)]
