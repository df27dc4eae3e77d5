"""Four concurrent decoupled BLS calls from one `async def execute`, each iterated with a
plain `for` as Triton's models do: gather_decoupled answers only when all four have
arrived, so they must be in flight together."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            round_id = pb_utils.get_input_tensor_by_name(request, "ROUND").as_numpy()
            arrived = await asyncio.gather(*(self._call(round_id) for _ in range(4)))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("ARRIVED", np.array(arrived, np.int32))]))
        return responses

    async def _call(self, round_id):
        call = pb_utils.InferenceRequest(
            model_name="gather_decoupled",
            requested_output_names=["ARRIVED"],
            inputs=[pb_utils.Tensor("ROUND", round_id)],
        )
        stream = await call.async_exec(decoupled=True)
        for response in stream:
            if response.has_error():
                raise pb_utils.TritonModelException(response.error().message())
            out = pb_utils.get_output_tensor_by_name(response, "ARRIVED")
            if out is not None:
                return int(out.as_numpy()[0])
        raise pb_utils.TritonModelException("no response")
