"""A decoupled model whose requests wait for one another: each answers once PARTIES requests
of its ROUND have arrived (their `async def execute` runs side by side on the stub's loop),
and answers with an error if they do not come within a few seconds. A caller that sends its
calls one after another, each waiting for the last to end, gets only errors."""

import asyncio
import time

import numpy as np
import triton_python_backend_utils as pb_utils

PARTIES = 4
PATIENCE_S = 8


class TritonPythonModel:
    def initialize(self, args):
        self.arrived = {}

    async def execute(self, requests):
        await asyncio.gather(*(self._one(request) for request in requests))

    async def _one(self, request):
        round_id = int(pb_utils.get_input_tensor_by_name(request, "ROUND").as_numpy()[0])
        self.arrived[round_id] = self.arrived.get(round_id, 0) + 1
        deadline = time.monotonic() + PATIENCE_S
        while self.arrived[round_id] < PARTIES and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        sender = request.get_response_sender()
        if self.arrived[round_id] < PARTIES:
            error = pb_utils.TritonError(f"only {self.arrived[round_id]} of {PARTIES} calls arrived together")
            sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        answer = pb_utils.Tensor("ARRIVED", np.array([self.arrived[round_id]], dtype=np.int32))
        sender.send(pb_utils.InferenceResponse([answer]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
