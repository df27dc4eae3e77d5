"""`ProcessInstance`: a model instance whose `model.py` runs in its own process (the default).

`execute` is a coroutine: it puts the batch's tensors into the shared-memory ring, sends one
control message and awaits the result on the server's event loop. A model that hangs past
`execute_timeout_seconds` is killed; one whose process dies fails only its own requests.
Either way a new process is started at once and the model keeps serving.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

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
from naiad_wire.interprocess.messages import encode_array, plain_parameters
from naiad_wire.interprocess.shm_ring import RingWriter

from ..model_side.model_host import batch_failure_message
from ..model_side.stub_messages import Execute, ForgetRegions, RequestItem
from .conversions import core_error, requested_output_names, sequence_flags
from .lent_regions import LentRegions, lends_regions
from .stub_connection import ExecuteOutcome, StubConnection, StubLaunch

if TYPE_CHECKING:
    from .backend import PythonModel

__all__ = ["ProcessInstance"]

log = logging.getLogger("naiad.backends.python")

# How long an unloading model's finalize may take before its process is killed.
FINALIZE_TIMEOUT_S = 30.0
# After a failed restart, requests fail at once for this long before the next attempt.
RESTART_BACKOFF_S = 5.0


class ProcessInstance(ModelInstance):
    model: PythonModel

    def __init__(self, model: PythonModel, context: InstanceContext) -> None:
        super().__init__(model, context)
        self.label = f"model '{model.context.name}' instance '{context.name}'"
        self._launch: StubLaunch = model.stub_launch(context, self.label)
        self._connection: StubConnection | None = None
        self._restart: asyncio.Task[StubConnection] | None = None
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_failure: tuple[float, NaiadError] | None = None
        self._output_names = [spec.name for spec in model.context.config.outputs]
        self._model = (model.context.name, int(model.context.version))
        self.restarts = 0
        # Clients' CUDA regions lent to the model's process (it keeps them open), and what
        # stops the registry telling this instance of their unregistering.
        self._lent_handles: set[bytes] = set()
        self._stop_hearing: Callable[[], None] | None = None

    def initialize(self) -> None:
        # Load time: start the process and run the model's initialize before serving.
        self._connection = StubConnection.start(self._launch)
        self._connection.on_exit = self._on_exit

    # -- process lifecycle ---------------------------------------------------------------

    def _on_exit(self, connection: StubConnection) -> None:
        if self._closing or connection is not self._connection:
            return
        # Start the replacement now, so the next request does not wait for it.
        self._start_restart()

    def _start_restart(self) -> asyncio.Task[StubConnection]:
        if self._restart is None or self._restart.done():
            self._restart = asyncio.create_task(self._spawn())
            # Whoever awaits it sees a failure; this keeps an unawaited one quiet.
            self._restart.add_done_callback(lambda task: task.cancelled() or task.exception())
        return self._restart

    async def _spawn(self) -> StubConnection:
        log.warning("%s: starting a new process for the model", self.label)
        connection = await asyncio.to_thread(StubConnection.start, self._launch)
        if self._closing:
            await asyncio.to_thread(connection.finalize_blocking, FINALIZE_TIMEOUT_S)
            raise NaiadError.unavailable(f"{self.label}: the model is unloading")
        connection.on_exit = self._on_exit
        await connection.attach()
        self._connection = connection
        self.restarts += 1
        return connection

    async def _live_connection(self) -> StubConnection:
        if self._loop is None:
            # An instance serves on the one loop that loaded it. (Looking the running loop up
            # for every batch costs a system call on CPython 3.11, for its process id.)
            self._loop = asyncio.get_running_loop()
        connection = self._connection
        if connection is not None and not connection.closed and connection.accepting:
            if not connection.attached:
                await connection.attach()
            return connection
        if self._last_failure is not None and time.monotonic() - self._last_failure[0] < RESTART_BACKOFF_S:
            # A model that cannot start is not retried for every request.
            raise self._last_failure[1]
        task = self._start_restart()
        try:
            connection = await asyncio.shield(task)
        except NaiadError as exc:
            self._restart = None  # try again after the back-off
            error = NaiadError.unavailable(f"{self.label}: the model's process could not be restarted: {exc.message}")
            self._last_failure = (time.monotonic(), error)
            raise error from None
        self._last_failure = None
        return connection

    # -- execution -----------------------------------------------------------------------

    async def execute(self, requests: list[CoreRequest]) -> list[CoreResponse] | None:
        connection = await self._live_connection()
        loop = self._loop
        assert loop is not None
        call_id = connection.new_id()
        future: asyncio.Future[ExecuteOutcome] = loop.create_future()
        keys = [connection.new_id() for _ in requests]
        decoupled = self._launch.decoupled
        for key, request in zip(keys, requests):
            connection.requests[key] = request
            if decoupled:
                connection.decoupled_keys.add(key)

        # Clients' CUDA regions go to the model's process only for a batch that placed tensors
        # in them, and never to a decoupled model: it answers after execute returns, when the
        # regions are let go. Their tensors go through the host.
        cpu_only = self._launch.settings.cpu_only_inputs
        lent = None if decoupled or not lends_regions(requests, not cpu_only) else LentRegions()
        lend_inputs = lent is not None and not cpu_only

        def build(ring: RingWriter) -> Execute:
            return Execute(
                call_id,
                self._model,
                [
                    RequestItem(
                        key,
                        request.id,
                        request.correlation_id,
                        sequence_flags(request),
                        request.timeout_us,
                        plain_parameters(request.parameters),
                        requested_output_names(request, self._output_names),
                        [encode_array(ring, t.name, t.datatype, t.data) for t in request.inputs]
                        if not lend_inputs
                        else [lent.input(ring, t) for t in request.inputs],  # type: ignore[union-attr]
                        {} if lent is None else lent.outputs_of(index, request),
                    )
                    for index, (key, request) in enumerate(zip(keys, requests))
                ],
            )

        connection.calls[call_id] = future
        try:
            connection.send_with(build)
            if lent is not None:
                self._lent(lent, loop)
                if lent.outputs:
                    connection.lent_outputs[call_id] = lent.outputs
            timeout = self._launch.settings.execute_timeout_s
            try:
                result, responses = await asyncio.wait_for(asyncio.shield(future), timeout) if timeout else await future
            except TimeoutError:
                reason = (
                    f"{self.label}: execute did not finish within {timeout:g} s "
                    "(parameter execute_timeout_seconds); the model's process was killed and is being restarted"
                )
                log.error("%s", reason)
                connection.exit_reason = reason
                connection.kill()
                raise NaiadError.internal(reason) from None
        finally:
            connection.calls.pop(call_id, None)
            connection.lent_outputs.pop(call_id, None)
            if lent is not None:
                lent.release()
            if not decoupled:
                for key in keys:
                    connection.requests.pop(key, None)
        if result.error is not None:
            code, text = result.error
            if decoupled:
                # The core ends these streams with the error; stop routing to them.
                for key in keys:
                    connection.requests.pop(key, None)
                    connection.decoupled_keys.discard(key)
            raise core_error(code, batch_failure_message(self.label, text))
        for index in result.rescheduled:
            requests[index].reschedule = True
            # Its next execution routes its responses under a new key.
            connection.requests.pop(keys[index], None)
            connection.decoupled_keys.discard(keys[index])
        # None in the slot of a request the model rescheduled, as abi.py's contract has it
        # (its annotation does not say so).
        return responses  # type: ignore[return-value]

    def _lent(self, lent: LentRegions, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the regions the model's process now has open, and hear of their end."""
        self._lent_handles |= lent.handles
        if self._stop_hearing is None and lent.placement is not None and lent.placement.regions is not None:

            def unregistered(handle: bytes) -> None:  # on the unregistering thread
                try:
                    loop.call_soon_threadsafe(self._forget, handle)
                except RuntimeError:
                    pass  # the server's loop is closed: so is the model's process

            self._stop_hearing = lent.placement.regions.on_unregistered(unregistered)

    def _forget(self, handle: bytes) -> None:
        """A region lent to the model's process was unregistered: it closes it there too."""
        if handle not in self._lent_handles:
            return
        self._lent_handles.discard(handle)
        connection = self._connection
        if connection is not None and not connection.closed:
            connection.send(ForgetRegions([handle]))

    # -- unload --------------------------------------------------------------------------

    def finalize(self) -> None:
        """Runs in a worker thread while the server's loop keeps running."""
        self._closing = True
        if self._stop_hearing is not None:
            self._stop_hearing()
        restart = self._restart
        if restart is not None and not restart.done() and self._loop is not None:
            # A replacement process is starting: let it finish (it finalizes itself on seeing
            # _closing) rather than leave it running.
            waiting = asyncio.run_coroutine_threadsafe(asyncio.wait([restart]), self._loop)
            try:
                waiting.result(self._launch.settings.start_timeout_s + 15)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
        connection = self._connection
        if connection is None or connection.closed:
            return
        if connection.loop is None:
            connection.finalize_blocking(FINALIZE_TIMEOUT_S)
            return
        future = asyncio.run_coroutine_threadsafe(connection.finalize(FINALIZE_TIMEOUT_S), connection.loop)
        try:
            future.result(FINALIZE_TIMEOUT_S + 15)
        except (concurrent.futures.TimeoutError, RuntimeError):
            connection.kill()
