"""`ModelHost`: loads a Triton `model.py` and calls it as Triton does.

Used in the model's own process (the stub) and, in in-process mode, inside the server.
It imports the file, builds `TritonPythonModel`, and runs `initialize(args)`,
`execute(requests)` (plain or `async def`), `finalize()` and the static
`auto_complete_config`, on the event loop it is given. It also checks what `execute`
returned, so both modes report a misbehaving model the same way.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import itertools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .bridge import Bridge, use_bridge
from .pb_utils import (
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    Logger,
    ModelConfig,
    TritonError,
    TritonModelException,
)
from .response_iterator import ResponseIterator

__all__ = [
    "ModelHost",
    "PendingExecute",
    "ExecuteFailure",
    "batch_failure_message",
    "load_model_module",
    "rescheduled",
    "run_auto_complete",
]

_module_numbers = itertools.count()


class ExecuteFailure(Exception):
    """`execute` raised: `code_name` is the TritonError code (INTERNAL unless the model
    raised a TritonError) and `text` is ``Type: message``."""

    def __init__(self, code_name: str, text: str) -> None:
        super().__init__(text)
        self.code_name = code_name
        self.text = text


def load_model_module(model_file: Path, in_server: bool) -> Any:
    """Import model.py under a unique module name (two models' files never collide); its
    directory goes on sys.path so helper modules beside it import, as in Triton. In the
    model's own process it goes first; inside the server (in-process mode) last, so a
    model's helper file can never shadow a module the server uses."""
    if not model_file.is_file():
        raise FileNotFoundError(f"model file {model_file} does not exist")
    directory = str(model_file.parent)
    if directory not in sys.path:
        if in_server:
            sys.path.append(directory)
        else:
            sys.path.insert(0, directory)
    module_name = f"naiad_python_model_{next(_module_numbers)}"
    spec = importlib.util.spec_from_file_location(module_name, model_file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {model_file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise AttributeError(f"{model_file} defines no class TritonPythonModel")
    return module


def run_auto_complete(model_file: Path, config: dict[str, Any], in_server: bool) -> dict[str, Any]:
    """Call the model's static `auto_complete_config`, if it has one; returns the config."""
    module = load_model_module(model_file, in_server)
    hook = getattr(module.TritonPythonModel, "auto_complete_config", None)
    if hook is None:
        return config
    result = hook(ModelConfig(config))
    if not isinstance(result, ModelConfig):
        # Triton's words (the config's name stands for the model's).
        raise TritonModelException(
            f"auto_complete_config function in model '{config.get('name', '')}' must return a valid "
            f"pb.ModelConfig object."
        )
    return result.as_dict()


def batch_failure_message(label: str, text: str) -> str:
    """Triton's wording for a batch whose execute failed, so log searches and client checks
    carry over; `label` names the model and instance."""
    return f"Failed to process the request(s) for {label}, message: {text}"


def rescheduled(requests: list[InferenceRequest]) -> list[int]:
    """The positions of the requests the model released with RESCHEDULE, to run again."""
    return [i for i, r in enumerate(requests) if r.release_flags() & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE]


class ModelHost:
    def __init__(
        self,
        model_file: Path,
        args: dict[str, str],
        bridge: Bridge,
        decoupled: bool,
        label: str,
        in_server: bool = False,
    ) -> None:
        self.model_file = model_file
        self.args = args
        self.bridge = bridge
        self.decoupled = decoupled
        self.label = label
        self.in_server = in_server
        self.model: Any = None
        # The coroutines of a decoupled `async def execute` still running.
        self._background: set[asyncio.Task[Any]] = set()
        bridge.model_dir = str(model_file.parent)

    async def initialize(self) -> None:
        use_bridge(self.bridge)
        module = load_model_module(self.model_file, self.in_server)
        self.model = module.TritonPythonModel()
        hook = getattr(self.model, "initialize", None)
        if hook is not None:
            result = hook(dict(self.args))
            if inspect.isawaitable(result):
                await result

    async def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse | None] | None:
        """Run execute. Returns one InferenceResponse per request for a non-decoupled model
        (None in the place of a rescheduled request; None, or a list of another length,
        when the model returned that: the server reports it), None for a decoupled one.
        Raises ExecuteFailure when execute raises or breaks a rule of Triton's.

        A decoupled model's `async def execute` is not awaited: as in Triton, it runs on this
        loop beside the coroutines of earlier batches while the instance takes the next."""
        outcome = self.start_execute(requests)
        if isinstance(outcome, PendingExecute):
            return await outcome.finish()
        return outcome

    def start_execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse | None] | None | PendingExecute:
        """`execute` without an event loop hop: a plain `def execute` runs to its result here
        (the stub calls it straight from the socket's read callback); an `async def execute`
        of a non-decoupled model comes back as a PendingExecute to await."""
        use_bridge(self.bridge)
        collector = None
        for request in requests:
            request._decoupled = self.decoupled
        if not self.decoupled:
            # A non-decoupled model may answer through the response sender instead of
            # returning responses; collect those so the server sees one list either way.
            collector = _CollectingBridge(self.bridge)
            for request in requests:
                request._bridge = collector
        try:
            result = self.model.execute(requests)
            # A list is what a plain execute returns; only anything else may be awaitable.
            if type(result) is not list and inspect.isawaitable(result):
                if self.decoupled:
                    self._run_in_background(result, requests)
                    return None
                assert collector is not None
                return PendingExecute(self, requests, collector, result)
        except Exception as exc:  # noqa: BLE001 - the model's failure becomes the batch's error
            return self._failed(exc, requests, collector)
        return self._checked(requests, result, collector)

    def _failed(
        self, exc: Exception, requests: list[InferenceRequest], collector: _CollectingBridge | None
    ) -> list[InferenceResponse | None]:
        failure = self._failure(exc)
        if collector is not None and collector.responses:
            return list(
                collector.answered_or(
                    requests,
                    TritonError.from_code_name(failure.code_name, batch_failure_message(self.label, failure.text)),
                )
            )
        raise failure from None

    def _checked(
        self, requests: list[InferenceRequest], result: Any, collector: _CollectingBridge | None
    ) -> list[InferenceResponse | None] | None:
        if self.decoupled:
            if result is not None:
                raise ExecuteFailure(
                    "INTERNAL",
                    f"Python model '{self.args.get('model_instance_name', '')}' is "
                    "using the decoupled mode and the execute function must return None.",
                )
            return None
        assert collector is not None
        return self._returned(requests, result, collector)

    def _failure(self, exc: BaseException) -> ExecuteFailure:
        self.bridge.log(Logger.ERROR, "execute failed:\n" + "".join(traceback.format_exception(exc)))
        code = exc.code_name() if isinstance(exc, TritonError) else "INTERNAL"
        return ExecuteFailure(code, f"{type(exc).__name__}: {exc}")

    def _returned(
        self, requests: list[InferenceRequest], result: Any, collector: _CollectingBridge
    ) -> list[InferenceResponse | None] | None:
        """What a non-decoupled execute returned, with what it sent, as one list."""
        if result is None:
            if requests and all(r._key in collector.responses for r in requests):
                return [collector.responses[r._key] for r in requests]
            if requests and all(r._key in collector.responses or r._sender is not None for r in requests):
                # Triton lets such a model send the responses later, through senders it took
                # in execute, from a thread or task it started: the batch ends when each
                # request has had its final flag. Without a sender, nothing can come: the
                # server reports the None.
                return _AnsweredLater(self, requests, collector, None)
            return None
        if not isinstance(result, (list, tuple)):
            raise ExecuteFailure(
                "INTERNAL",
                f"execute returned a {type(result).__name__}; it must return a list with one "
                "pb_utils.InferenceResponse per request",
            )
        if len(result) != len(requests):
            return list(result)  # the server reports the count
        again = set(rescheduled(requests))
        checked: list[InferenceResponse | None] = []
        broken: str | None = None
        for index, (request, item) in enumerate(zip(requests, result)):
            sent = collector.responses.get(request._key)
            if index in again:
                if item is not None:
                    # Triton's words, its spelling included.
                    raise ExecuteFailure(
                        "INTERNAL",
                        "Expected a None object in the execute function return list for reschduled request, "
                        f"found type '{type(item)}'.",
                    )
                checked.append(None)
            elif item is None and sent is not None:
                checked.append(sent)  # answered through the sender, as Triton allows
            elif not isinstance(item, InferenceResponse):
                checked.append(
                    InferenceResponse(
                        error=TritonError(
                            f"execute returned a {type(item).__name__} instead of a pb_utils.InferenceResponse"
                        )
                    )
                )
            else:
                # A returned response counts as the final one the sender sends.
                sender = request._sender
                if sender is None:
                    request._answered = True  # a sender made later starts closed
                else:
                    try:
                        sender._record(True, True)
                    except TritonModelException as exc:
                        broken = broken or exc.message()
                checked.append(item)
        if broken is not None:
            error = TritonError(batch_failure_message(self.label, broken))
            self.bridge.log(Logger.ERROR, error.message())
            return collector.answered_or(requests, error)
        return checked

    def _run_in_background(self, coroutine: Any, requests: list[InferenceRequest]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(lambda done: self._background_done(done, requests))

    def _background_done(self, task: asyncio.Task[Any], requests: list[InferenceRequest]) -> None:
        self._background.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            if task.result() is not None:
                self.bridge.log(
                    Logger.WARNING,
                    "a decoupled model's async execute returned a value; it is "
                    "ignored, as in Triton (send responses with the response sender)",
                )
            return
        # Triton only logs this; ending the streams still open tells their clients too.
        failure = self._failure(exc)
        error = InferenceResponse(
            error=TritonError.from_code_name(failure.code_name, batch_failure_message(self.label, failure.text))
        )
        for request in requests:
            try:
                request.get_response_sender().send(error, TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except TritonModelException:
                pass  # that stream was already over

    async def finalize(self) -> None:
        use_bridge(self.bridge)
        # As Triton stops the stub's event loop before finalize: coroutines still running end.
        for task in list(self._background):
            task.cancel()
        hook = getattr(self.model, "finalize", None)
        if hook is not None:
            result = hook()
            if inspect.isawaitable(result):
                await result


class PendingExecute:
    """The rest of an `async def execute` of a non-decoupled model, to await on the loop."""

    def __init__(
        self, host: ModelHost, requests: list[InferenceRequest], collector: _CollectingBridge, awaitable: Any
    ) -> None:
        self._host = host
        self._requests = requests
        self._collector = collector
        self._awaitable = awaitable

    async def finish(self) -> list[InferenceResponse | None] | None:
        try:
            result = await self._awaitable
        except Exception as exc:  # noqa: BLE001 - the model's failure becomes the batch's error
            return self._host._failed(exc, self._requests, self._collector)
        outcome = self._host._checked(self._requests, result, self._collector)
        if isinstance(outcome, PendingExecute):
            return await outcome.finish()
        return outcome


class _AnsweredLater(PendingExecute):
    """A non-decoupled `execute` that returned None before answering every request: its
    responses come through the response sender later."""

    async def finish(self) -> list[InferenceResponse | None] | None:
        await self._collector.all_final(self._requests)
        missing = TritonError("the model sent the final flag without a response")
        return list(self._collector.answered_or(self._requests, missing))


class _CollectingBridge(Bridge):
    """Keeps the responses a non-decoupled model sends through its response sender."""

    def __init__(self, inner: Bridge) -> None:
        self.inner = inner
        self.responses: dict[int, InferenceResponse] = {}
        self._finals: set[int] = set()
        # While `all_final` waits: its loop and the wake-up to call there (senders may run
        # on any thread).
        self._waiting: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None

    def send_response(self, request: InferenceRequest, response: InferenceResponse | None, final: bool) -> None:
        # The sender has checked the rules: at most one response arrives here.
        if response is not None:
            self.responses[request._key] = response
        if final:
            self._finals.add(request._key)
            waiting = self._waiting
            if waiting is not None:
                waiting[0].call_soon_threadsafe(waiting[1])

    async def all_final(self, requests: list[InferenceRequest]) -> None:
        """Wait until every request of `requests` has been sent its final flag."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        self._waiting = (loop, changed.set)
        try:
            while not all(r._key in self._finals for r in requests):
                changed.clear()
                await changed.wait()
        finally:
            self._waiting = None

    def answered_or(self, requests: list[InferenceRequest], error: TritonError) -> list[InferenceResponse]:
        """A failed batch as Triton ends it: a request already answered keeps its answer,
        every other one gets `error`."""
        return [self.responses.get(r._key) or InferenceResponse(error=error) for r in requests]

    def is_cancelled(self, request: InferenceRequest) -> bool:
        return self.inner.is_cancelled(request)

    def bls(self, request: InferenceRequest) -> InferenceResponse:
        return self.inner.bls(request)

    def bls_stream(self, request: InferenceRequest) -> ResponseIterator:
        return self.inner.bls_stream(request)

    async def bls_async(self, request: InferenceRequest) -> InferenceResponse:
        return await self.inner.bls_async(request)

    async def bls_stream_async(self, request: InferenceRequest) -> ResponseIterator:
        return await self.inner.bls_stream_async(request)

    def manage_model(self, action: str, arguments: dict[str, Any]) -> Any:
        return self.inner.manage_model(action, arguments)

    def log(self, level: int, message: str) -> None:
        self.inner.log(level, message)

    def metric_family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        self.inner.metric_family_new(handle, name, description, kind)

    def metric_family_delete(self, handle: int) -> None:
        self.inner.metric_family_delete(handle)

    def metric_new(self, handle: int, family: int, labels: dict[str, str], buckets: list[float] | None) -> None:
        self.inner.metric_new(handle, family, labels, buckets)

    def metric_update(self, handle: int, operation: str, value: float) -> None:
        self.inner.metric_update(handle, operation, value)

    def metric_value(self, handle: int) -> float:
        return self.inner.metric_value(handle)
