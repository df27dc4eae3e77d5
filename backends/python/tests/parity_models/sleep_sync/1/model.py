"""Answers DELAY after sleeping DELAY seconds; four instances serve four requests at once."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            time.sleep(float(delay[0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", delay)]))
        return responses
