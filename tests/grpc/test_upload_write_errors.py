"""A load whose uploaded file cannot be written (a name longer than the file system allows) fails
as Triton's does: INTERNAL, "failed to load '<model>', failed to poll from model repository"
(Triton's simple_grpc_model_control.py example checks both), naming no server path, and the
server goes on serving."""

from __future__ import annotations

import tritonclient.grpc as tg
from grpc_servers import expect_error, numpy_server, write_repository


def test_unwritable_uploaded_file_fails_as_a_failed_poll(tmp_path):
    repo = write_repository(tmp_path, ["identity"])
    with numpy_server(repo, "--model-control-mode", "explicit") as process:
        with tg.InferenceServerClient(process.grpc_url) as client:
            message = expect_error(
                lambda: client.load_model("identity", config="{}", files={"file:" + "A" * 256: b"a"}),
                "INTERNAL",
                "failed to load 'identity', failed to poll from model repository",
                "could not be written",
            )
            # Neither the server's paths nor the OS's own words reach the client.
            assert "/tmp" not in message and "naiad-uploads" not in message, message
            assert "File name too long" not in message, message
            assert client.is_server_live()
            client.load_model("identity")
            assert client.is_model_ready("identity")
