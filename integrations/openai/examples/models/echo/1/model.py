"""echo: answers with the words of the last `user:` line of its prompt (the whole prompt when
there is none), at most `max_tokens` of them. Streaming, it sends one word per response (with
the space before it), so the responses joined are the answer; otherwise one response.

A request parameter `fail_after` (an integer) makes it fail after that many words; the tests
use it to show an error in the middle of a stream."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _input(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().reshape(-1)[0]


def _text_response(text):
    return pb_utils.InferenceResponse([pb_utils.Tensor("text_output", np.array([text.encode()], dtype=object))])


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            sender = request.get_response_sender()
            prompt = _input(request, "text_input").decode()
            users = [line[len("user: ") :] for line in prompt.splitlines() if line.startswith("user: ")]
            words = (users[-1] if users else prompt).split()
            max_tokens = _input(request, "max_tokens")
            if max_tokens is not None:
                words = words[: int(max_tokens)]
            fail_after = json.loads(request.parameters()).get("fail_after")
            if not _input(request, "stream"):
                sender.send(_text_response(" ".join(words)), flags=final)
                continue
            for index, word in enumerate(words):
                if index == fail_after:
                    error = pb_utils.TritonError(f"echo failed after {index} words")
                    sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                    break
                sender.send(_text_response(word if index == 0 else " " + word))
            else:
                sender.send(flags=final)
        return None
