"""Answers each request with its own INPUT0 as OUTPUT0 (Triton's "simple_identity" and the
identity backend's "custom_identity_int32"; the latter's model.py is a link to this one)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]
