"""An `async def execute` that runs two BLS calls concurrently with async_exec: add_sub_fp32
(OUTPUT0 of INPUT0 + INPUT1) and the decoupled repeat model (sum of its streamed responses)."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            add = pb_utils.InferenceRequest(
                model_name="add_sub_fp32",
                requested_output_names=["OUTPUT0"],
                inputs=[
                    pb_utils.Tensor("INPUT0", pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[None]),
                    pb_utils.Tensor("INPUT1", pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()[None]),
                ],
            )
            repeat = pb_utils.InferenceRequest(
                model_name="repeat_decoupled",
                requested_output_names=["OUT"],
                inputs=[pb_utils.Tensor("IN", np.array([1, 2, 3, 4], dtype=np.int32))],
            )
            added, stream = await asyncio.gather(add.async_exec(), repeat.async_exec(decoupled=True))
            total = 0
            # As in Triton, the decoupled result is iterated with a plain for loop.
            for part in stream:
                if part.has_error():
                    raise pb_utils.TritonModelException(part.error().message())
                out = pb_utils.get_output_tensor_by_name(part, "OUT")
                if out is not None:
                    total += int(out.as_numpy()[0])
            if added.has_error():
                raise pb_utils.TritonModelException(added.error().message())
            output0 = pb_utils.get_output_tensor_by_name(added, "OUTPUT0").as_numpy()[0]
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", output0),
                        pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
                    ]
                )
            )
        return responses
