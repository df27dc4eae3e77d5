"""Streams 0, 1, ... COUNT-1, one every 0.1 s, until its request is cancelled."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            threading.Thread(target=self.tick, args=(request, count)).start()

    def tick(self, request, count):
        sender = request.get_response_sender()
        for n in range(count):
            if request.is_cancelled():
                pb_utils.Logger.log_info(f"ticker cancelled after {n}")
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)),
                    pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))]))
            time.sleep(0.1)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
