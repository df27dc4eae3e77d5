"""Starts a decoupled BLS call to ticker, cancels it after the first response, and reports
how many responses it saw and the last one's error."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="ticker",
                inputs=[pb_utils.get_input_tensor_by_name(request, "COUNT")],
                requested_output_names=["OUT"],
            )
            stream = call.exec(decoupled=True)
            seen, last = 0, ""
            for response in stream:
                if response.has_error():
                    last = response.error().message()
                    continue
                if response.output_tensors():
                    seen += 1
                    stream.cancel()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("SEEN", np.array([seen], dtype=np.int32)),
                        pb_utils.Tensor("LAST", np.array([last.encode()], dtype=object)),
                    ]
                )
            )
        return responses
