import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # Triton binds pb_utils.TritonError after model.py is imported: read it here.
        self.codes = [
            pb_utils.TritonError.UNKNOWN,
            pb_utils.TritonError.INTERNAL,
            pb_utils.TritonError.NOT_FOUND,
            pb_utils.TritonError.INVALID_ARG,
            pb_utils.TritonError.UNAVAILABLE,
            pb_utils.TritonError.UNSUPPORTED,
            pb_utils.TritonError.ALREADY_EXISTS,
            pb_utils.TritonError.CANCELLED,
        ]

    def execute(self, requests):
        responses = []
        for request in requests:
            code = int(pb_utils.get_input_tensor_by_name(request, "CODE").as_numpy()[0])
            if code < 0:
                out = pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(request, "CODE").as_numpy())
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
                continue
            error = pb_utils.TritonError(f"error with code {code}", self.codes[code])
            responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
