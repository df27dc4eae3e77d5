"""An INT32 accumulator per sequence, keyed by its string correlation ID, as Triton's
dyna_sequence test backend keeps: START sets it to the sum of INPUT, later requests add theirs,
END adds the correlation ID read as an integer and forgets the sequence."""

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0]


class TritonPythonModel:
    def initialize(self, args):
        self.accumulators = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            corrid = _scalar(request, "CORRID")
            corrid = corrid.decode() if isinstance(corrid, bytes) else str(corrid)
            if _scalar(request, "READY"):
                total = int(value.sum())
                if not _scalar(request, "START"):
                    total += self.accumulators.get(corrid, 0)
                if _scalar(request, "END"):
                    total += int(corrid)
                    self.accumulators.pop(corrid, None)
                else:
                    self.accumulators[corrid] = total
            else:
                total = self.accumulators.get(corrid, 0)
            output = np.full(value.shape, total, dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", output)]))
        return responses
