"""`InProcessInstance`: the opt-in modes that run model.py inside the server process, for
the lowest latency: `execution_mode: in_process` and `execution_mode: inline`.

In `in_process` the model gets its own thread with its own event loop (so `async def
execute` and blocking BLS calls never stall the server's loop), and tensors pass as the
same numpy arrays, with no copies. What it gives up is isolation: a model that crashes
takes the server with it, and one that hangs keeps its thread (its requests still fail at
the timeout).

`inline` also drops the thread hop: `execute` runs on the server's event loop thread, where
the request was parsed. Two cross-thread wake-ups per batch cost ~300 us at one client on a
2-vCPU virtual machine (docs/performance.md), more than a small model's whole execution.
The price: the server serves nothing else while `execute` runs, `execute_timeout_seconds`
cannot interrupt it, and blocking BLS (`exec()`, `stream_exec()`), which needs that same
loop, is refused with an error (`await async_exec()` works). `initialize` and `finalize`
still run on the model's thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from naiad.backend import (
    InferenceRequest as CoreRequest,
)
from naiad.backend import (
    InferenceResponse as CoreResponse,
)
from naiad.backend import (
    InstanceContext,
    ModelInstance,
    NaiadError,
)

from ..model_side import pb_utils as utils
from ..model_side.bridge import Bridge
from ..model_side.model_host import ExecuteFailure, ModelHost, batch_failure_message, rescheduled
from ..model_side.response_iterator import ResponseIterator
from .bls_runner import BlsCall, cancelled_response, run_bls
from .conversions import (
    core_error,
    core_response_from_utils,
    requested_output_names,
    sequence_flags,
    utils_response_from_core,
)
from .metric_owner import MetricOwner
from .model_control import manage_model

if TYPE_CHECKING:
    from .backend import PythonModel

__all__ = ["InProcessInstance"]

log = logging.getLogger("naiad.backends.python")
_LOG_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.DEBUG}


class InProcessBridge(Bridge):
    def __init__(self, instance: InProcessInstance) -> None:
        self.instance = instance
        self.requests: dict[int, CoreRequest] = {}
        self.server_loop: asyncio.AbstractEventLoop | None = None
        server = instance.model.context.server
        self.metrics = MetricOwner(server.custom_metrics if server is not None else None, instance.label)
        self._metrics_lock = threading.Lock()
        self._doomed: collections.deque[int] = collections.deque()

    def send_response(
        self, request: utils.InferenceRequest, response: utils.InferenceResponse | None, final: bool
    ) -> None:
        core = self.requests.get(request._key)
        if core is None or core.response_sender is None:
            return
        if final:
            self.requests.pop(request._key, None)
        core.response_sender(None if response is None else core_response_from_utils(response), final)

    def is_cancelled(self, request: utils.InferenceRequest) -> bool:
        core = self.requests.get(request._key)
        return bool(core and core.cancelled)

    def _call(self, request: utils.InferenceRequest) -> BlsCall:
        return BlsCall(
            request.model_name(),
            request.model_version(),
            [(t.name(), t.datatype(), t._host()) for t in request.inputs()],
            request.requested_output_names(),
            request.request_id(),
            request.correlation_id(),
            request.flags(),
            request.timeout(),
            request.parameters_dict(),
        )

    def _server_loop(self) -> asyncio.AbstractEventLoop:
        if self.server_loop is None:
            raise utils.TritonModelException("BLS requests and the model loading API are only available from execute")
        return self.server_loop

    def _refuse_blocking_on_server_loop(self) -> None:
        # Waiting here would stop the loop that has to run the BLS request: a deadlock.
        if self.server_loop is not None and asyncio._get_running_loop() is self.server_loop:
            raise utils.TritonModelException(
                "a blocking BLS call (exec/stream_exec) cannot run in execution_mode 'inline', where execute "
                "runs on the server's event loop; use 'await request.async_exec()' from an async def execute, "
                "or execution_mode 'in_process'"
            )

    def _feed(self, request: utils.InferenceRequest, decoupled: bool, put: Any) -> Callable[[], None]:
        """Run the call on the server's loop, handing each response to `put`; returns what
        cancels it (ResponseIterator.cancel)."""
        server = self.instance.model.context.server

        async def pump() -> None:
            try:
                async for response in run_bls(server, self._call(request), decoupled):
                    put(response)
            except asyncio.CancelledError:
                put(cancelled_response())  # leaving run_bls cancelled the call

        running = asyncio.run_coroutine_threadsafe(pump(), self._server_loop())
        return running.cancel

    def bls(self, request: utils.InferenceRequest) -> utils.InferenceResponse:
        self._refuse_blocking_on_server_loop()
        replies: queue.Queue[CoreResponse] = queue.Queue()
        self._feed(request, False, replies.put)
        return utils_response_from_core(replies.get())

    def bls_stream(self, request: utils.InferenceRequest) -> ResponseIterator:
        self._refuse_blocking_on_server_loop()
        return self._stream(request)

    def _stream(self, request: utils.InferenceRequest) -> ResponseIterator:
        responses = ResponseIterator()
        responses.on_cancel = self._feed(request, True, lambda r: responses.put(utils_response_from_core(r), r.final))
        return responses

    async def bls_async(self, request: utils.InferenceRequest) -> utils.InferenceResponse:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CoreResponse] = loop.create_future()
        self._feed(request, False, lambda r: loop.call_soon_threadsafe(lambda: future.done() or future.set_result(r)))
        return utils_response_from_core(await future)

    async def bls_stream_async(self, request: utils.InferenceRequest) -> ResponseIterator:
        responses = self._stream(request)
        if asyncio.get_running_loop() is self.server_loop:
            # Inline: a plain `for` over the responses (what Triton's examples do) would block
            # the loop that produces them, so the await returns once all have arrived.
            return await responses.complete()
        return await responses.first_arrived()

    def manage_model(self, action: str, arguments: dict[str, Any]) -> Any:
        if self.server_loop is not None and asyncio._get_running_loop() is self.server_loop:
            raise utils.TritonModelException(
                "the model loading API waits for the server's event loop, where execute runs in execution_mode "
                "'inline'; use execution_mode 'in_process'"
            )
        work = manage_model(self.instance.model.context.server, action, arguments)
        try:
            return asyncio.run_coroutine_threadsafe(work, self._server_loop()).result()
        except NaiadError as exc:
            raise utils.TritonModelException(exc.message) from None

    def log(self, level: int, message: str) -> None:
        log.log(_LOG_LEVELS.get(level, logging.INFO), "%s: %s", self.instance.label, message)

    # -- custom metrics: straight to the server's registry -------------------------------------

    @contextlib.contextmanager
    def _metrics_call(self) -> Iterator[MetricOwner]:
        """Serialize this model's metric calls, report families deleted meanwhile, and turn
        the registry's NaiadError into the TritonModelException model code expects."""
        with self._metrics_lock:
            self._delete_doomed()
            try:
                yield self.metrics
            except NaiadError as exc:
                raise utils.TritonModelException(exc.message) from None

    def _delete_doomed(self) -> None:
        while self._doomed:
            self.metrics.family_delete(self._doomed.popleft())

    def metric_family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        with self._metrics_call() as metrics:
            metrics.family_new(handle, name, description, kind)

    def metric_family_delete(self, handle: int) -> None:
        # Called from MetricFamily.__del__, which garbage collection may run at any allocation,
        # even inside one of this model's metric calls: never block or re-enter here. What
        # cannot be done at once is done by the next call (or at unload).
        self._doomed.append(handle)
        if self._metrics_lock.acquire(blocking=False):
            try:
                self._delete_doomed()
            finally:
                self._metrics_lock.release()

    def metric_new(self, handle: int, family: int, labels: dict[str, str], buckets: list[float] | None) -> None:
        with self._metrics_call() as metrics:
            metrics.metric_new(handle, family, labels, buckets)

    def metric_update(self, handle: int, operation: str, value: float) -> None:
        with self._metrics_call() as metrics:
            metrics.update(handle, operation, value)

    def metric_value(self, handle: int) -> float:
        with self._metrics_call() as metrics:
            return metrics.value(handle)

    def release_metrics(self) -> None:
        """At unload: everything the model created leaves the endpoint."""
        with self._metrics_lock:
            self._doomed.clear()
            self.metrics.release_all()


class InProcessInstance(ModelInstance):
    model: PythonModel

    def __init__(self, model: PythonModel, context: InstanceContext) -> None:
        super().__init__(model, context)
        self.label = f"model '{model.context.name}' instance '{context.name}'"
        launch = model.stub_launch(context, self.label)
        self._settings = launch.settings
        self._decoupled = launch.decoupled
        self._bridge = InProcessBridge(self)
        self._host = ModelHost(
            launch.model_file, launch.args, self._bridge, launch.decoupled, self.label, in_server=True
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"naiad-python-{context.name}", daemon=True)
        self._keys = itertools.count(1)
        self._output_names = [spec.name for spec in model.context.config.outputs]
        self._version = int(model.context.version)

    def initialize(self) -> None:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._host.initialize(), self._loop)
        try:
            future.result(self._settings.start_timeout_s or None)
        except Exception as exc:  # noqa: BLE001 - a failed initialize fails the load, with its reason
            self._stop_loop()
            self._bridge.release_metrics()
            raise NaiadError.unavailable(f"{self.label}: initialize failed: {type(exc).__name__}: {exc}") from exc

    async def execute(self, requests: list[CoreRequest]) -> list[CoreResponse] | None:
        self._bridge.server_loop = asyncio.get_running_loop()
        model_requests = []
        keys = []
        for request in requests:
            key = next(self._keys)
            keys.append(key)
            self._bridge.requests[key] = request
            model_request = utils.InferenceRequest(
                request_id=request.id,
                correlation_id=request.correlation_id,
                inputs=[utils.Tensor(t.name, t.data, t.datatype) for t in request.inputs],
                requested_output_names=set(requested_output_names(request, self._output_names)),
                model_name=request.model_name,
                model_version=self._version,
                flags=sequence_flags(request),
                timeout=request.timeout_us,
                parameters=request.parameters,
            )
            model_request._bridge = self._bridge
            model_request._key = key
            model_requests.append(model_request)
        timeout = self._settings.execute_timeout_s
        try:
            if self._settings.inline:
                result = await self._host.execute(model_requests)
            else:
                future = asyncio.run_coroutine_threadsafe(self._host.execute(model_requests), self._loop)
                result = await asyncio.wait_for(asyncio.wrap_future(future), timeout or None)
        except TimeoutError:
            raise NaiadError.internal(
                f"{self.label}: execute did not finish within {timeout:g} s (parameter execute_timeout_seconds); "
                "in-process models cannot be stopped, so the model keeps its thread"
            ) from None
        except ExecuteFailure as failure:
            if self._decoupled:
                # The core ends these streams with the error; stop routing to them.
                for key in keys:
                    self._bridge.requests.pop(key, None)
                if self._settings.inline:
                    # Responses sent before the failure wait as callbacks on this loop: let
                    # them reach their clients before the error does, as in the other modes.
                    await asyncio.sleep(0)
            raise core_error(failure.code_name, batch_failure_message(self.label, failure.text)) from None
        finally:
            if not self._decoupled:
                for key in keys:
                    self._bridge.requests.pop(key, None)
        for index in rescheduled(model_requests):
            requests[index].reschedule = True
            # Its next execution routes its responses under a new key.
            self._bridge.requests.pop(keys[index], None)
        if result is None:
            return None
        return [None if r is None else core_response_from_utils(r) for r in result]

    def finalize(self) -> None:
        if self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._host.finalize(), self._loop)
            try:
                future.result(30)
            except Exception:  # noqa: BLE001
                log.exception("%s: finalize failed", self.label)
            self._stop_loop()
        # Streams the model left open end with an error rather than hang.
        unloaded = NaiadError.unavailable(f"{self.label}: the model was unloaded")
        for request in list(self._bridge.requests.values()):
            if request.response_sender is not None:
                request.response_sender(CoreResponse(error=unloaded), True)
        self._bridge.requests.clear()
        # The model's metrics leave the endpoint with it, whether or not its objects are collected.
        self._bridge.release_metrics()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
