"""Triton's example sequence models, stateless: OUTPUT = READY * (INPUT + START + END * CORRID).

"simple_sequence" has no END or CORRID control; "simple_dyna_sequence" (whose model.py is a link
to this one) has both, so the last answer of a sequence carries its correlation ID."""

import numpy as np
import triton_python_backend_utils as pb_utils


def _control(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = _control(request, "INPUT").astype(np.int64) + _control(request, "START")
            end, corrid = _control(request, "END"), _control(request, "CORRID")
            if end is not None and corrid is not None:
                value = value + end * corrid.astype(np.int64).reshape(end.shape)
            output = (value * _control(request, "READY")).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", output)]))
        return responses
