"""A one-response model for the generate tests: scales `values` by `factor`, sums them, and
returns the request parameters it received as JSON text."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "values").as_numpy()
            factor = pb_utils.get_input_tensor_by_name(request, "factor").as_numpy()[0]
            scaled = (values * factor).astype(np.float32)
            outputs = [
                pb_utils.Tensor("scaled", scaled),
                pb_utils.Tensor("total", np.array([scaled.sum()], dtype=np.float32)),
                pb_utils.Tensor("parameters", np.array([request.parameters().encode()], dtype=object)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
