"""Blocking BLS calls from threads of the model's own while execute waits for them: the
thread that runs execute reads nothing meanwhile, so the replies must reach the others."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.pool = ThreadPoolExecutor(4)

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1")

            def call(_):
                reply = pb_utils.InferenceRequest(
                    model_name="add_sub_flat", inputs=[a, b], requested_output_names=["OUTPUT0"]
                ).exec()
                assert not reply.has_error(), reply.error()
                assert not request.is_cancelled()
                return pb_utils.get_output_tensor_by_name(reply, "OUTPUT0").as_numpy()

            total = sum(self.pool.map(call, range(8)))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", total.astype(np.float32))]))
        return responses

    def finalize(self):
        self.pool.shutdown()
