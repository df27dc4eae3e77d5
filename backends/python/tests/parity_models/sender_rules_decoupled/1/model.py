"""A decoupled model that breaks the response sender's rules in the way CASE names; the
error a broken rule raises in the model is logged as `CASE <case>: <message>`."""

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def answer(text):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text.encode()], dtype=object))])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if case == "return_value":
                sender.send(answer("sent"))
                return [answer("returned")]
            if case == "send_after_final":
                sender.send(answer("sent"), FINAL)
                try:
                    sender.send(answer("late"))
                except pb_utils.TritonModelException as exc:
                    pb_utils.Logger.log_info(f"CASE {case}: {exc}")
        return None
