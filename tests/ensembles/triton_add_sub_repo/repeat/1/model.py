import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Decoupled: three responses per request, the i-th holding INPUT0 + i."""

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            for i in range(3):
                out = pb_utils.Tensor("OUTPUT0", (data + np.float32(i)).astype(np.float32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
