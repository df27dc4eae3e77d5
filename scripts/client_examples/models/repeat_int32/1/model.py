"""Decoupled: answers one request with one response per element of IN, as Triton's repeat
backend does, then ends the stream with the final flag alone."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _input(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            values, delays = _input(request, "IN"), _input(request, "DELAY")
            if len(delays) != len(values):
                sender.send(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(
                            f"expected DELAY to have {len(values)} elements (as IN), got {len(delays)}"
                        )
                    ),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            for index, (value, delay) in enumerate(zip(values, delays)):
                time.sleep(delay / 1000.0)
                sender.send(
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                            pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                        ]
                    )
                )
            time.sleep(_input(request, "WAIT")[0] / 1000.0)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
