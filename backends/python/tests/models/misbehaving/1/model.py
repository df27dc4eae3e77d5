"""Misbehaves as the request's MODE says; answers "ok" otherwise."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.pid = str(os.getpid()).encode()

    def execute(self, requests):
        mode = pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0].decode()
        if mode == "raise":
            raise ValueError("the model raised on purpose")
        if mode == "model_exception":
            raise pb_utils.TritonModelException("a TritonModelException")
        if mode == "none":
            return None
        if mode == "too_few":
            return []
        if mode == "not_a_response":
            return ["not a response" for _ in requests]
        if mode == "hang":
            time.sleep(60)
        if mode == "crash":
            os._exit(3)
        if mode == "log":
            pb_utils.Logger.log_warn("a warning from the model")
            pb_utils.Logger.log_error("an error from the model")
        out = pb_utils.Tensor("OUT", np.array([self.pid], dtype=np.object_))
        if mode == "sender":
            # Default (non-decoupled) mode may answer through the response sender too.
            for request in requests:
                request.get_response_sender().send(
                    pb_utils.InferenceResponse([out]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
            return None
        return [pb_utils.InferenceResponse([out]) for _ in requests]
