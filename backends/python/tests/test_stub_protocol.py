"""What the server answers a model's process outside of serving, and what it does with a
message it does not expect: one dispatch table serves every phase of the process's life."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from python_backend_servers import ServerThread

from naiad import NaiadError, ServerOptions

CONFIG = """name: "{name}"
backend: "python"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""

IDENTITY = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]
"""

# Calls another model from finalize: unloaded before it served a request, its process was
# never attached to the server's loop, where BLS calls are served.
BLS_IN_FINALIZE = (
    IDENTITY
    + """
    def finalize(self):
        import numpy as np
        request = pb_utils.InferenceRequest(
            model_name="identity", inputs=[pb_utils.Tensor("X", np.ones(1, np.float32))], requested_output_names=["Y"]
        )
        response = request.exec()
        outcome = response.error().message() if response.has_error() else "answered"
        pb_utils.Logger.log_info(f"BLS in finalize: {outcome}")
        pb_utils.is_model_ready("identity")  # raises: finalize fails, and says why
"""
)

# Its first process sends the server a message only the server may send (an Execute); the
# file beside model.py tells the process started after it to serve.
IMPOSTOR = """
import os
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils
from naiad_backend_python.model_side.bridge import current_bridge
from naiad_backend_python.model_side.stub_messages import Execute

SENT = Path(__file__).with_name("sent")

class TritonPythonModel:
    def execute(self, requests):
        if not SENT.exists():
            SENT.write_text("")
            current_bridge().channel.send(Execute(1, ("impostor", 1), []))
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([os.getpid()], np.float32))]) for _ in requests]
"""


# Its first process cannot send its answers (as if the socket failed for good); the file beside
# model.py tells the process started after it to serve.
UNSENDABLE = """
import errno
import os
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils
from naiad_backend_python.model_side.bridge import current_bridge

BROKEN = Path(__file__).with_name("broken")

def refuse(frame):
    raise OSError(errno.ENOBUFS, "no buffer space (injected by the test)")

class TritonPythonModel:
    def execute(self, requests):
        if not BROKEN.exists():
            BROKEN.write_text("")
            current_bridge().channel._send_all = refuse
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([os.getpid()], np.float32))]) for _ in requests]
"""


def _model(root: Path, name: str, source: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(source)
    (root / name / "config.pbtxt").write_text(CONFIG.format(name=name))


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "naiad.backends.python"]


def test_bls_and_model_control_in_finalize_of_a_process_never_attached_are_answered(tmp_path, caplog):
    _model(tmp_path, "identity", IDENTITY)
    _model(tmp_path, "bls_in_finalize", BLS_IN_FINALIZE)
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)], model_control_mode="explicit"))
    try:
        server.run(server.server.load_model("identity"))
        server.run(server.server.load_model("bls_in_finalize"))
        with caplog.at_level(logging.INFO, logger="naiad.backends.python"):
            # Without an answer the model would wait in finalize until it is killed.
            server.run(server.server.unload_model("bls_in_finalize"), timeout=25)
        label = "model 'bls_in_finalize' instance 'bls_in_finalize_0'"
        lines = _lines(caplog)
        assert f"{label}: BLS in finalize: BLS requests are not available during finalize" in lines
        assert any(
            line.startswith(f"{label}: finalize failed")
            and "model loading API is not available during finalize" in line
            for line in lines
        ), lines
        # The server still serves the model the finalize tried to call.
        assert server.infer("identity", {"X": np.array([2], np.float32)}).output("Y").data.tolist() == [2.0]
    finally:
        server.close()


def _first_batch_fails_then_a_new_process_serves(root: Path, caplog, name: str, source: str) -> NaiadError:
    """The error of the first request to `name`, whose first process breaks on it; checks that
    the server then serves the model from a new process."""
    _model(root, name, source)
    server = ServerThread(ServerOptions(model_repositories=[str(root)]))
    try:
        x = {"X": np.array([1], np.float32)}
        with caplog.at_level(logging.ERROR, logger="naiad.backends.python"):
            failed = server.infer_error(name, x)
        assert server.infer(name, x).output("Y").data[0] > 0
        return failed
    finally:
        server.close()


def test_a_message_only_the_server_sends_ends_the_process_and_a_new_one_serves(tmp_path, caplog):
    failed = _first_batch_fails_then_a_new_process_serves(tmp_path, caplog, "impostor", IMPOSTOR)
    assert "the model's process sent a bad message" in failed.message
    assert "sent Execute, a message only the server sends" in failed.message
    (dropped,) = [r for r in caplog.records if "bad message from the model's process" in r.getMessage()]
    assert "sent Execute, a message only the server sends" in (dropped.exc_text or "")


def test_a_process_that_cannot_send_its_answers_leaves_and_the_server_fails_the_batch_then_serves(tmp_path, caplog):
    # Left to the event loop, the failed send was logged in the model's process and the
    # request waited for ever.
    failed = _first_batch_fails_then_a_new_process_serves(tmp_path, caplog, "unsendable", UNSENDABLE)
    assert "the model's process exited unexpectedly (exit code 1)" in failed.message
