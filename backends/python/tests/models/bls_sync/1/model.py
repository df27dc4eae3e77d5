"""Forwards INPUT0/INPUT1 to the model named by MODEL_NAME with a blocking BLS call."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model_name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0].decode()
            infer_request = pb_utils.InferenceRequest(
                model_name=model_name,
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[
                    pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                    pb_utils.get_input_tensor_by_name(request, "INPUT1"),
                ],
            )
            infer_response = infer_request.exec()
            if infer_response.has_error():
                # Pass the called model's error on, with its code.
                responses.append(pb_utils.InferenceResponse(error=infer_response.error()))
                continue
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.get_output_tensor_by_name(infer_response, "OUTPUT0"),
                        pb_utils.get_output_tensor_by_name(infer_response, "OUTPUT1"),
                    ]
                )
            )
        return responses
