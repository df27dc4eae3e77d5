"""Every string argument given as bytes, as Triton's stub accepts them: the BLS model name
read from an input tensor (python_backend's bls example does this), tensor and output names,
the request id, a log line and an error message."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model_name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            pb_utils.Logger.log_info(b"bls_bytes calls " + model_name)
            call = pb_utils.InferenceRequest(
                model_name=model_name,
                request_id=b"from-bytes",
                inputs=[pb_utils.Tensor(b"DELAY", delay)],
                requested_output_names=[b"OUT"],
            )
            answer = call.exec()
            if answer.has_error():
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message().encode()))
                )
                continue
            out = pb_utils.get_output_tensor_by_name(answer, "OUT")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(b"OUT", out.as_numpy() + 1)]))
        return responses
