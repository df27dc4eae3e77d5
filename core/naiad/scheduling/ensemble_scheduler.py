"""Runs ensemble requests: the steps of an `EnsemblePlan` as a graph of requests.

A step starts as soon as every tensor it reads exists; steps that do not depend on each
other run at the same time. Each step is an ordinary request to its model, so the step
model's own scheduler, dynamic batcher, instances and statistics apply exactly as for a
client's request. A plain step is started with `start_infer` and continues the run from
its answer's callback: no task, queue or coroutine per step, which under load cost an
ensemble of two Python models a third of its throughput. A decoupled step, or a step
under `max_inflight_requests`, runs as a task reading `infer_stream`.

Decoupled steps: every response of a decoupled step starts a new "frame" holding its
outputs, and the steps downstream of it run once per frame. Validation guarantees that a
step only reads tensors of one lineage (see `ensemble_validation`), so a frame never needs
values from a sibling frame. When the ensemble outputs descend from a decoupled step, each
frame that completes them becomes one response of the ensemble's stream.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.ensemble_validation import EnsemblePlan, EnsembleStep, StepConfigLookup, validate_ensemble
from ..config.model_config import ModelConfig
from ..errors import ErrorCode, NaiadError
from ..inference import InferenceRequest, InferenceResponse, RequestedOutput
from ..observability.statistics import ModelStatistics
from ..request_validation import shape_matches
from ..tensor import Tensor
from .job import Job
from .scheduler import Scheduler

if TYPE_CHECKING:
    from ..backend.service import InferenceService

__all__ = ["EnsembleScheduler"]

log = logging.getLogger("naiad.ensemble")


class EnsembleScheduler(Scheduler):
    """The scheduler of one ensemble version."""

    def __init__(
        self,
        server: InferenceService,
        config: ModelConfig,
        plan: EnsemblePlan,
        statistics: ModelStatistics,
        version: str,
        lookup: StepConfigLookup,
    ) -> None:
        self._server = server
        self._config = config
        self._plan = plan
        self._statistics = statistics
        self._version = version
        self._lookup = lookup
        # The step versions the plan was last validated against (weakly: an unloaded
        # version must not stay alive here); a step model reloaded since then is checked
        # again before the next request uses it.
        self._validated_with: tuple[weakref.ref[object], ...] | None = None
        self._runs: set[_EnsembleRun] = set()
        # Set by `stop` while it waits for the runs in flight to end.
        self._drained: asyncio.Future[None] | None = None
        self._accepting = False
        limit = plan.max_inflight_requests
        # Triton's max_inflight_requests: per step, across this ensemble's requests.
        self._limiters = [asyncio.Semaphore(limit) for _ in plan.steps] if limit > 0 else None

    @property
    def plan(self) -> EnsemblePlan:
        return self._plan

    def enqueue(self, job: Job) -> None:
        if not self._accepting:
            job.finish(InferenceResponse(error=NaiadError.unavailable("model is not accepting requests")))
            return
        try:
            plan = self.current_plan()
        except NaiadError as exc:
            job.finish(self._stamp(InferenceResponse(error=exc), job))
            return
        run = _EnsembleRun(self, plan, job)
        self._runs.add(run)
        run.begin()

    def _ended(self, run: _EnsembleRun) -> None:
        self._runs.discard(run)
        drained = self._drained
        if not self._runs and drained is not None and not drained.done():
            drained.set_result(None)

    async def start(self) -> None:
        self._accepting = True

    async def stop(self, timeout: float | None = None) -> None:
        self._accepting = False
        if not self._runs:
            return
        self._drained = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._drained, timeout)
        except TimeoutError:
            for run in list(self._runs):
                run.abort()
        finally:
            self._drained = None

    # -- readiness -----------------------------------------------------------------------

    def current_plan(self) -> EnsemblePlan:
        """The plan, after checking that every step model is loaded and ready; raises
        UNAVAILABLE naming the missing step model otherwise."""
        name = self._config.name
        versions = []
        for step in self._plan.steps:
            try:
                loaded = self._server.model(step.model_name, step.version_text)
            except NaiadError as exc:
                raise NaiadError.unavailable(
                    f"in ensemble '{name}', {step.label} is not available: {exc.message}"
                ) from None
            if not loaded.is_ready():
                raise NaiadError.unavailable(
                    f"in ensemble '{name}', {step.label} is not available: model '{step.model_name}' is not ready"
                )
            versions.append(loaded)
        validated = self._validated_with
        if validated is None or any(ref() is not loaded for ref, loaded in zip(validated, versions)):
            self._plan = self._revalidate()
            self._validated_with = tuple(weakref.ref(loaded) for loaded in versions)
        return self._plan

    def _revalidate(self) -> EnsemblePlan:
        try:
            plan = validate_ensemble(self._config, self._lookup)
        except NaiadError as exc:
            raise NaiadError.unavailable(f"a step model changed since the ensemble was loaded: {exc.message}") from None
        if plan.decoupled != self._config.decoupled:
            raise NaiadError.unavailable(
                f"ensemble '{self._config.name}': a step model changed between decoupled and not decoupled since "
                "the ensemble was loaded; load the ensemble again"
            )
        return plan

    def problem(self) -> str | None:
        """Why the ensemble cannot serve now (a step model missing or changed), or None."""
        try:
            self.current_plan()
        except NaiadError as exc:
            return exc.message
        return None

    def _stamp(self, response: InferenceResponse, job: Job) -> InferenceResponse:
        response.model_name = self._config.name
        response.model_version = self._version
        response.id = job.request.id
        return response


class _Frame:
    """The ensemble tensors of one lineage value: the request's own (lineage 0), or one
    response of a decoupled step and what downstream steps made of it."""

    __slots__ = ("lineage", "values", "batch_sizes", "sequences", "fired", "answered")

    def __init__(self, lineage: int) -> None:
        self.lineage = lineage
        # None stands for a tensor that is absent: an optional ensemble input the request
        # left out, or a step output the step did not produce. It counts as present, and
        # the steps reading it get no such input (as in Triton).
        self.values: dict[str, Tensor | None] = {}
        # The batch size of the request that made each tensor (0: made by a model without
        # a batch dimension); Triton decides with it where to add or drop a batch dimension.
        self.batch_sizes: dict[str, int] = {}
        # The sequence a step's response reassigned its tensors to (see _SequenceOverride).
        self.sequences: dict[str, _SequenceOverride] = {}
        self.fired: set[int] = set()
        self.answered = False

    def put(self, tensor: Tensor, batch_size: int) -> None:
        self.values[tensor.name] = tensor
        self.batch_sizes[tensor.name] = batch_size

    def put_absent(self, name: str) -> None:
        self.values[name] = None
        self.batch_sizes[name] = 0


class _EnsembleRun:
    """One ensemble request in flight. It ends when no step is left in flight."""

    def __init__(self, scheduler: EnsembleScheduler, plan: EnsemblePlan, job: Job) -> None:
        self.scheduler = scheduler
        self.plan = plan
        self.job = job
        self.request = job.request
        self.requested = [o.name for o in self.request.outputs] or list(plan.outputs)
        self.needed = plan.steps_needed(self.requested)
        # Each step in flight (a token, or the task running it), with what cancels it.
        self.inflight: dict[object, Callable[[], None]] = {}
        self.error: NaiadError | None = None
        self.root = _Frame(0)
        self.step_ns = 0
        self.answered = 0
        self.ended = False

    @property
    def name(self) -> str:
        return self.plan.name

    def begin(self) -> None:
        config = self.scheduler._config
        batch_size = self.job.batch_size if config.max_batch_size > 0 else 0
        for tensor in self.request.inputs:
            self.root.put(tensor, batch_size)
        for spec in config.inputs:
            if spec.optional and spec.name not in self.root.values:
                self.root.put_absent(spec.name)
        try:
            self._offer(self.root, list(self.root.values), first=True)
        except Exception as exc:  # noqa: BLE001 - a bug here must still answer the client
            log.exception("ensemble '%s' failed", self.name)
            self._fail(NaiadError.internal(f"in ensemble '{self.name}', {type(exc).__name__}: {exc}"))
        self._end_if_idle()

    def abort(self) -> None:
        """The ensemble is unloaded with this request in flight: cancel its steps and say so."""
        self.ended = True
        self._cancel_steps()
        self._finish(
            InferenceResponse(
                error=NaiadError.unavailable(
                    f"in ensemble '{self.name}', the ensemble was unloaded before the request finished"
                )
            )
        )
        self.scheduler._ended(self)

    def _end_if_idle(self) -> None:
        if not self.inflight and not self.ended:
            self.ended = True
            self._conclude()
            self.scheduler._ended(self)

    # -- scheduling ----------------------------------------------------------------------

    def _offer(
        self,
        frame: _Frame,
        tensors: list[str],
        first: bool = False,
        caller: object = None,
        more_may_follow: bool = False,
    ) -> None:
        """Start every needed step of `frame`'s lineage that `tensors` made ready; answer
        when the frame completes the requested outputs. `caller`: the step in flight whose
        outputs these are; `more_may_follow`: it is a decoupled step that may still respond."""
        if self.error is not None:
            return
        candidates: set[int] = set()
        for tensor in tensors:
            candidates.update(self.plan.consumers.get(tensor, ()))
        if first:
            candidates.update(s.index for s in self.plan.steps if not s.inputs)
        for index in sorted(candidates):
            step = self.plan.steps[index]
            if (
                index in self.needed
                and step.lineage == frame.lineage
                and index not in frame.fired
                and all(t in frame.values for t in step.inputs.values())
            ):
                frame.fired.add(index)
                self._start(step, frame)
        if (
            self.plan.decoupled
            and frame.lineage == self.plan.output_lineage
            and not frame.answered
            and all(name in frame.values for name in self.requested)
        ):
            frame.answered = True
            self.answered += 1
            # Like Triton, the response that leaves nothing in flight carries the final flag.
            final = not more_may_follow and all(step is caller for step in self.inflight)
            self._send(self._response(frame, final))

    def _start(self, step: EnsembleStep, frame: _Frame) -> None:
        request = self._step_request(step, frame)
        if not step.decoupled and self.scheduler._limiters is None:
            if self.request.cancelled:
                self._fail(NaiadError.cancelled_request(), step)
                return
            token = object()
            answered = functools.partial(self._step_answered, token, step, frame, request, time.monotonic_ns())
            try:
                cancel = self.scheduler._server.start_infer(request, answered, partial_outputs=True)
            except NaiadError as exc:
                self._fail(exc, step)
                return
            if cancel is not None:
                self.inflight[token] = cancel
                return
            # None: the step model became decoupled since the plan was made; read its stream.
        task = asyncio.create_task(self._run_step(step, frame, request))
        self.inflight[task] = functools.partial(_cancel_task, task, request)
        task.add_done_callback(self._step_ended)

    def _step_answered(
        self,
        token: object,
        step: EnsembleStep,
        frame: _Frame,
        request: InferenceRequest,
        started: int,
        answer: InferenceResponse | NaiadError,
    ) -> None:
        if token not in self.inflight:
            return  # cancelled: the run has gone on without this step
        self.step_ns += time.monotonic_ns() - started
        try:
            if isinstance(answer, NaiadError):
                raise answer
            if self.request.cancelled:
                raise NaiadError.cancelled_request()
            self._store(step, frame, request, answer)
            self._offer(frame, list(step.outputs.values()), caller=token)
        except NaiadError as exc:
            self._fail(exc, step)
        except Exception as exc:  # noqa: BLE001 - a bug here must still answer the client
            self._fail(NaiadError.internal(f"{type(exc).__name__}: {exc}"), step)
        self.inflight.pop(token, None)
        self._end_if_idle()

    def _step_ended(self, task: asyncio.Task[None]) -> None:
        self.inflight.pop(task, None)
        self._end_if_idle()

    def _step_request(self, step: EnsembleStep, frame: _Frame) -> InferenceRequest:
        """The step's request: the ensemble tensors renamed to the step model's inputs,
        with the ensemble request's id, sequence, priority, timeout and parameters, which
        Triton also forwards to composing models."""
        parent = self.request
        sequence = _SequenceOverride(parent.correlation_id, parent.sequence_start, parent.sequence_end)
        overridden = False
        inputs = []
        for input_name, tensor in step.inputs.items():
            override = frame.sequences.get(tensor)
            if override is not None:
                if overridden and override != sequence:
                    # As Triton: the first override holds, and the conflict is logged.
                    log.error(
                        "ensemble '%s': different sequence parameters reach step %d (model '%s'); correlation ID "
                        "%r, start %s, end %s are used",
                        self.name,
                        step.index,
                        step.model_name,
                        sequence.correlation_id,
                        sequence.start,
                        sequence.end,
                    )
                elif not overridden:
                    sequence, overridden = override, True
            value = frame.values[tensor]
            if value is not None:
                dims = step.input_dims.get(input_name, ())
                inputs.append(_fitted(value, input_name, dims, step.batching, frame.batch_sizes[tensor]))
        return InferenceRequest(
            model_name=step.model_name,
            inputs=inputs,
            model_version=step.version_text,
            id=parent.id,
            outputs=[RequestedOutput(name) for name in step.outputs],
            parameters=dict(parent.parameters),
            correlation_id=sequence.correlation_id,
            sequence_start=sequence.start,
            sequence_end=sequence.end,
            priority=parent.priority,
            timeout_us=parent.timeout_us,
        )

    async def _run_step(self, step: EnsembleStep, frame: _Frame, request: InferenceRequest) -> None:
        """A step as a task: a decoupled one, or one waiting for `max_inflight_requests`."""
        caller = asyncio.current_task()
        limiters = self.scheduler._limiters
        limiter = limiters[step.index] if limiters is not None else None
        if limiter is not None:
            await limiter.acquire()
        started = time.monotonic_ns()
        try:
            if self.error is not None:
                return
            if self.request.cancelled:
                raise NaiadError.cancelled_request()
            # Both kinds of step are read as a stream: a step may leave out some of its
            # outputs, and the ensemble goes on without them as Triton's does.
            async for response in self.scheduler._server.infer_stream(request):
                if response.error is not None:
                    raise response.error
                if self.request.cancelled:
                    raise NaiadError.cancelled_request()
                if not step.decoupled:
                    self._store(step, frame, request, response)
                    self._offer(frame, list(step.outputs.values()), caller=caller)
                elif response.outputs:
                    child = _Frame(step.output_lineage)
                    self._store(step, child, request, response)
                    self._offer(child, list(child.values), caller=caller, more_may_follow=True)
        except asyncio.CancelledError:
            request.cancelled = True
            raise
        except NaiadError as exc:
            self._fail(exc, step)
        except Exception as exc:  # noqa: BLE001
            self._fail(NaiadError.internal(f"{type(exc).__name__}: {exc}"), step)
        finally:
            self.step_ns += time.monotonic_ns() - started
            if limiter is not None:
                limiter.release()

    def _store(self, step: EnsembleStep, frame: _Frame, request: InferenceRequest, response: InferenceResponse) -> None:
        batch_size = _batch_size(request) if step.batching else 0
        override = _SequenceOverride.of(response, request)
        for tensor in response.outputs:
            target = step.outputs.get(tensor.name)
            if target is not None:
                frame.put(Tensor(target, tensor.datatype, tensor.shape, tensor.data), batch_size)
                if override is not None:
                    frame.sequences[target] = override
        for target in step.outputs.values():
            if target not in frame.values:
                frame.put_absent(target)

    # -- ending --------------------------------------------------------------------------

    def _fail(self, error: NaiadError, step: EnsembleStep | None = None) -> None:
        if self.error is not None:
            return
        message = error.message
        if not message.startswith(f"in ensemble '{self.name}'"):
            # Triton's words first ("in ensemble 'E', " and the step model's own error, which
            # clients match on), then which step it was.
            where = f" [{step.label}]" if step is not None else ""
            message = f"in ensemble '{self.name}', {message}{where}"
        self.error = NaiadError(error.code, message)
        self._cancel_steps()

    def _cancel_steps(self) -> None:
        inflight, self.inflight = self.inflight, {}
        for cancel in inflight.values():
            cancel()

    def _conclude(self) -> None:
        statistics = self.scheduler._statistics
        if self.error is not None:
            self._finish(InferenceResponse(error=self.error))
            return
        if self.plan.decoupled:
            self._record(statistics)
            if not self.job.done:
                # The stream is over without a last response to carry the flag: the
                # frontends forward this bare marker only to clients that asked for it.
                self._finish(InferenceResponse(parameters={"triton_final_response": True}))
            return
        missing = [name for name in self.requested if name not in self.root.values]
        if missing:
            self._finish(
                InferenceResponse(
                    error=NaiadError(
                        ErrorCode.INTERNAL,
                        f"in ensemble '{self.name}', no step is left to run but output(s) "
                        + ", ".join(f"'{m}'" for m in missing)
                        + " were not produced",
                    )
                )
            )
            return
        self._record(statistics)
        self._finish(self._response(self.root, True))

    def _record(self, statistics: ModelStatistics) -> None:
        # The ensemble's own execution: one per request, its compute time the time its
        # steps took (each step model also counts its own executions).
        statistics.record_execution(self.job.batch_size, 1, 0, self.step_ns, 0)

    def _response(self, frame: _Frame, final: bool) -> InferenceResponse:
        """The ensemble's answer from `frame`. As in Triton, it names the request's sequence
        in its parameters (`sequence_id`, `sequence_start`, `sequence_end`: a client reading a
        stream of several sequences tells them apart so), or the sequence a step reassigned
        an output to."""
        parameters: dict[str, object] = {}
        request = self.job.request
        if request.correlation_id not in (0, ""):
            parameters = _SequenceOverride(
                request.correlation_id, request.sequence_start, request.sequence_end
            ).parameters()
        for name in self.requested:
            override = frame.sequences.get(name)
            if override is not None and frame.values.get(name) is not None:
                parameters = override.parameters()
        return InferenceResponse(outputs=self._outputs(frame), final=final, parameters=parameters)

    def _outputs(self, frame: _Frame) -> list[Tensor]:
        config = self.scheduler._config
        batching = config.max_batch_size > 0
        outputs = []
        for name in self.requested:
            value = frame.values.get(name)
            if value is None:
                # As Triton: the response goes without the output a step did not produce.
                log.debug("ensemble '%s': composing models did not output tensor %s", self.name, name)
                continue
            spec = config.output_by_name.get(name)
            dims = spec.dims if spec is not None else tuple(value.shape)
            outputs.append(_fitted(value, name, dims, batching, frame.batch_sizes[name]))
        return outputs

    def _send(self, response: InferenceResponse) -> None:
        self.job.finish(self.scheduler._stamp(response, self.job))

    def _finish(self, response: InferenceResponse) -> None:
        response.final = True
        self._send(response)


def _cancel_task(task: asyncio.Task[None], request: InferenceRequest) -> None:
    request.cancelled = True
    if task is not asyncio.current_task():
        task.cancel()


@dataclass(frozen=True, slots=True)
class _SequenceOverride:
    """A step's response may reassign the tensors it produced to another sequence with the
    response parameters `sequence_id`, `sequence_start` and `sequence_end` (Triton's names);
    the steps reading those tensors then run with that correlation ID and those flags."""

    correlation_id: int | str
    start: bool
    end: bool

    @classmethod
    def of(cls, response: InferenceResponse, request: InferenceRequest) -> _SequenceOverride | None:
        parameters = response.parameters
        if not any(key in parameters for key in ("sequence_id", "sequence_start", "sequence_end")):
            return None
        correlation_id = parameters.get("sequence_id", request.correlation_id)
        if isinstance(correlation_id, bool) or not isinstance(correlation_id, (int, str)):
            raise NaiadError.invalid("expected parameter 'sequence_id' to be an integer or a string")
        flags = []
        for key in ("sequence_start", "sequence_end"):
            value = parameters.get(key, False)
            if not isinstance(value, bool):
                raise NaiadError.invalid(f"expect parameter '{key}' to be a boolean")
            flags.append(value)
        return cls(correlation_id, flags[0], flags[1])

    def parameters(self) -> dict[str, object]:
        return {"sequence_id": self.correlation_id, "sequence_start": self.start, "sequence_end": self.end}


def _batch_size(request: InferenceRequest) -> int:
    """The batch size of a request to a batching model: its inputs' first dimension."""
    for tensor in request.inputs:
        if tensor.shape:
            return int(tensor.shape[0])
    return 1


def _fitted(tensor: Tensor, name: str, dims: tuple[int, ...], batching: bool, tensor_batch_size: int) -> Tensor:
    """`tensor` as `name` where a model (or the ensemble's answer) with config `dims` reads
    it, by Triton's rule: a batch dimension changes only where one side batches and the
    other does not. A tensor without one, read by a batching model, gets a batch of 1 when
    it matches `dims` as it is; a tensor of batch 1, read without batching, loses its batch
    dimension when it does not match `dims` as it is."""
    shape = tuple(int(d) for d in tensor.shape)
    if batching != (tensor_batch_size != 0):
        if batching and shape_matches(shape, dims):
            shape = (1, *shape)
        elif not batching and tensor_batch_size == 1 and shape and not shape_matches(shape, dims):
            shape = shape[1:]
    if shape == tuple(tensor.shape) and name == tensor.name:
        return tensor
    # The same bytes: an input placed on a GPU stays placed there.
    return Tensor(name, tensor.datatype, shape, tensor.data.reshape(shape), placement=tensor.placement)
