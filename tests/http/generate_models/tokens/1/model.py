"""A decoupled "language model" for the generate tests: it answers with the words of its
text_input, one word per response (at most max_tokens of them). The request parameter
`fail_after` makes it fail with an error response after that many words; `wait_for_cancel`
makes it wait (up to 20 s) after the first word until the client cancels."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0].decode()
            words = text.split()
            limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            if limit is not None:
                words = words[: int(limit.as_numpy()[0])]
            parameters = json.loads(request.parameters())
            fail_after = parameters.get("fail_after")
            for index, word in enumerate(words):
                if index == 1 and parameters.get("wait_for_cancel"):
                    deadline = time.monotonic() + 20
                    while not sender.is_cancelled() and time.monotonic() < deadline:
                        time.sleep(0.01)
                    if sender.is_cancelled():
                        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        break
                if index == fail_after:
                    error = pb_utils.TritonError(f"the model failed after {index} words")
                    sender.send(
                        pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                    )
                    break
                token = np.array([word.encode()], dtype=object)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", token)]))
            else:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
