import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            # Round-trip through Triton's helpers: they must agree with the wire format.
            packed = pb_utils.serialize_byte_tensor(values)
            restored = pb_utils.deserialize_bytes_tensor(packed).reshape(values.shape)
            out = pb_utils.Tensor("OUTPUT0", np.array(restored, dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
