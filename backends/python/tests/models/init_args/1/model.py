"""Answers with the args its initialize received, plus facts about the request, as JSON."""

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = dict(args)
        pb_utils.Logger.log_info(f"initialized with {sorted(args)}")

    def execute(self, requests):
        responses = []
        for request in requests:
            answer = dict(self.args)
            answer["pid"] = os.getpid()
            answer["sys_prefix"] = sys.prefix
            answer["request_id"] = request.request_id()
            answer["correlation_id"] = request.correlation_id()
            answer["flags"] = request.flags()
            answer["parameters"] = json.loads(request.parameters())
            answer["requested_output_names"] = sorted(request.requested_output_names())
            answer["is_cancelled"] = request.is_cancelled()
            out = pb_utils.Tensor("ARGS", np.array([json.dumps(answer).encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([out], parameters={"from_model": "yes"}))
        return responses
