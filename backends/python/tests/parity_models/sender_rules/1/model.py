"""A non-decoupled model that breaks the response sender's rules in the way CASE names;
the error each broken rule raises in the model is logged as `CASE <case>: <message>`."""

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def answer(text):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text.encode()], dtype=object))])


def attempt(case, send):
    try:
        send()
    except pb_utils.TritonModelException as exc:
        pb_utils.Logger.log_info(f"CASE {case}: {exc}")


class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
        sender = request.get_response_sender()
        if case == "two_responses":
            sender.send(answer("first"))
            attempt(case, lambda: sender.send(answer("second")))
            return None
        if case == "send_and_return":
            sender.send(answer("sent"), FINAL)
            return [answer("returned")]
        if case == "final_before_response":
            attempt(case, lambda: sender.send(None, FINAL))
            return [answer("returned")]
        if case == "send_after_final":
            sender.send(answer("sent"), FINAL)
            attempt(case, lambda: sender.send(None, FINAL))
            return None
        if case == "unsupported_flag":
            attempt(case, lambda: sender.send(answer("x"), 4))
            return [answer("returned")]
        if case == "no_response_no_flag":
            attempt(case, lambda: sender.send(None))
            return [answer("returned")]
        return [answer(f"unknown case {case}")]
