"""Streams one response, then waits (up to 30 s) for the client to cancel and answers -1
once it sees the cancellation through the response sender."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.stream, args=(request,), daemon=True).start()
        return None

    def stream(self, request):
        sender = request.get_response_sender()
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))]))
        deadline = time.monotonic() + 30
        while not sender.is_cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = -1 if request.is_cancelled() else 0
        sender.send(
            pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([seen], dtype=np.int32))]),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )
