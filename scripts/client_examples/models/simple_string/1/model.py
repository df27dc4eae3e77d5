"""Sum and difference of integers sent as strings, as Triton's example model "simple_string"."""

import numpy as np
import triton_python_backend_utils as pb_utils


def _as_ints(tensor):
    return np.vectorize(int, otypes=[np.int64])(tensor.as_numpy())


def _as_strings(values):
    return np.vectorize(lambda v: str(v).encode(), otypes=[np.object_])(values)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = _as_ints(pb_utils.get_input_tensor_by_name(request, "INPUT0"))
            b = _as_ints(pb_utils.get_input_tensor_by_name(request, "INPUT1"))
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", _as_strings(a + b)),
                        pb_utils.Tensor("OUTPUT1", _as_strings(a - b)),
                    ]
                )
            )
        return responses
