"""A model that is not decoupled but answers after `execute` returned None: it takes each
request's response sender in execute, and a thread of its own sends the one response, then
the final flag (Triton's response_sender tests do this)."""

import threading
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            threading.Thread(target=self._answer, args=(request, sender), daemon=True).start()
        return None

    def _answer(self, request, sender):
        time.sleep(0.2)  # surely after execute returned
        value = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value * 2)]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
