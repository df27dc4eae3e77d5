"""Calls the decoupled repeat model with a blocking exec(decoupled=True) and counts."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            infer_request = pb_utils.InferenceRequest(
                model_name="repeat_decoupled",
                requested_output_names=["OUT", "IDX"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
            )
            count = total = 0
            for infer_response in infer_request.exec(decoupled=True):
                if infer_response.has_error():
                    raise pb_utils.TritonModelException(infer_response.error().message())
                # The last response may be empty: it only carries the final flag.
                if len(infer_response.output_tensors()) == 0:
                    break
                count += 1
                total += int(pb_utils.get_output_tensor_by_name(infer_response, "OUT").as_numpy()[0])
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32)),
                        pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
                    ]
                )
            )
        return responses
