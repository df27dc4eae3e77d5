"""Reports what model code sees: the public names of pb_utils and its classes, sys.argv,
and whether argparse and unittest.main() work at initialize, as under Triton."""

import argparse
import inspect
import json
import sys
import unittest

import numpy as np
import triton_python_backend_utils as pb_utils


def public(obj):
    return sorted(name for name in dir(obj) if not name.startswith("_"))


class Arithmetic(unittest.TestCase):
    def test_sum(self):
        self.assertEqual(1 + 1, 2)


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log("pb_utils_api initializing", pb_utils.Logger.INFO)
        pb_utils.Logger.log(b"pb_utils_api logs bytes too", pb_utils.Logger.LogLevel.VERBOSE)
        namespace = argparse.ArgumentParser().parse_args()
        program = unittest.main(module=__name__, exit=False)
        self.report = {
            "argv": sys.argv,
            "argparse": vars(namespace),
            "unittest": [program.result.testsRun, program.result.wasSuccessful()],
            "levels": [
                int(pb_utils.Logger.INFO),
                int(pb_utils.Logger.WARNING),
                int(pb_utils.Logger.ERROR),
                int(pb_utils.Logger.VERBOSE),
            ],
            "module": public(pb_utils),
            "classes": {
                name: public(getattr(pb_utils, name))
                for name in public(pb_utils)
                if inspect.isclass(getattr(pb_utils, name))
            },
            "model_dir": pb_utils.get_model_dir(),
        }
        self.report["classes"]["Logger.LogLevel"] = [level.name for level in pb_utils.Logger.LogLevel]

    def execute(self, requests):
        responses = []
        for request in requests:
            report = dict(self.report)
            sender = request.get_response_sender()
            report["classes"]["InferenceResponseSender"] = public(sender)
            report["classes"]["InferenceTrace"] = public(request.trace())
            delay = pb_utils.Tensor("DELAY", np.zeros(1, dtype=np.float32))
            call = pb_utils.InferenceRequest(model_name="async_sleep", inputs=[delay], requested_output_names=["OUT"])
            stream = call.exec(decoupled=True)
            report["classes"]["ResponseIterator"] = public(stream)
            list(stream)
            text = json.dumps(report).encode()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text], dtype=object))]))
        return responses
