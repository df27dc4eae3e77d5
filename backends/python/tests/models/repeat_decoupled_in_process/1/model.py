"""Sends one response per element of IN (zero for an empty IN), from a thread, then the
final flag; in the style of Triton's decoupled "repeat" example."""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(self.model_config):
            raise pb_utils.TritonModelException("this model must be decoupled")
        self.threads = []

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay_s = 0 if delay is None else int(delay.as_numpy()[0]) / 1000
            sender = request.get_response_sender()
            thread = threading.Thread(target=self.respond, args=(sender, values, delay_s))
            thread.start()
            self.threads.append(thread)
        return None

    def respond(self, sender, values, delay_s):
        for index, value in enumerate(values):
            if value == -1:
                # Crash mid-stream (for the isolation tests); what was sent is delivered.
                os._exit(5)
            if delay_s:
                time.sleep(delay_s)
            out = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
            idx = pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join()
