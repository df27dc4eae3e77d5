"""A decoupled `async def execute` that awaits a BLS call to sleep_sync per request."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY")
            call = pb_utils.InferenceRequest(model_name="sleep_sync", inputs=[delay], requested_output_names=["OUT"])
            answer = await call.async_exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(answer, "OUT")]),
                pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
