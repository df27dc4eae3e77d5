"""A decoupled `async def execute` that answers each request after DELAY seconds."""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            await asyncio.sleep(float(delay[0]))
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", delay)]),
                pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
