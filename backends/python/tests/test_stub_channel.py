"""The model process's side of its socket to the server (`model_side.stub_channel`): answers
arrive whole however far the server falls behind in reading them, and the process leaves when
it must, whatever model code did to its standard streams."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
from naiad_backend_python.model_side import stub_messages as m
from naiad_backend_python.model_side.stub import _new_event_loop
from naiad_backend_python.model_side.stub_channel import Channel
from python_backend_servers import ServerThread, make_request

from naiad import InferenceResponse, ServerOptions
from naiad_wire.interprocess.messages import FrameReader
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd


def test_frames_larger_than_the_sockets_buffer_arrive_whole_while_the_server_is_slow_to_read() -> None:
    # The stub's event loop watches the socket as the stub does; uvloop (libuv) then puts it in
    # non-blocking mode, and a plain sendall failed half-way through a frame with
    # BlockingIOError as soon as the server fell behind: that batch's answers were lost.
    stub_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ring_fd = create_ring_fd(1 << 16)
    loop = _new_event_loop()
    try:
        loop.add_reader(stub_end.fileno(), lambda: None)
        assert not os.get_blocking(stub_end.fileno()), "the loop left the socket blocking: the test proves nothing"
        channel = Channel(stub_end, RingReader(ring_fd), RingWriter(ring_fd))
        sent = [m.InitError(message=f"{n}" * 700_000, traceback=f"frame {n}") for n in range(3)]
        failures: list[BaseException] = []

        def send_all() -> None:
            try:
                for message in sent:
                    channel.send(message)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        sender = threading.Thread(target=send_all)
        sender.start()
        time.sleep(0.3)  # the server busy elsewhere: the socket's buffer fills up
        frames, received = FrameReader(), []
        server_end.settimeout(10)
        while len(received) < len(sent) and not failures:
            received += [m.unpack(body) for body in frames.feed(server_end.recv(1 << 16))]
        sender.join(10)
        assert not failures, f"a send failed: {failures[0]!r}"
        assert received == sent
    finally:
        loop.close()
        stub_end.close()
        server_end.close()
        os.close(ring_fd)


# Each request's answer (7 KiB) travels inside the result message, not in the ring: a batch of
# 64 is one message several times the size of the socket's buffer.
WIDE_ROWS = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor(
                "Y", np.repeat(pb_utils.get_input_tensor_by_name(r, "X").as_numpy(), 1792, axis=1)
            )])
            for r in requests
        ]
"""

WIDE_ROWS_CONFIG = """name: "wide_rows"
backend: "python"
max_batch_size: 64
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1792 ] } ]
dynamic_batching { preferred_batch_size: [ 64 ] max_queue_delay_microseconds: 2000000 }
"""


def test_a_batch_whose_answers_outgrow_the_sockets_buffer_is_answered_whole(tmp_path) -> None:
    (tmp_path / "wide_rows" / "1").mkdir(parents=True)
    (tmp_path / "wide_rows" / "1" / "model.py").write_text(WIDE_ROWS)
    (tmp_path / "wide_rows" / "config.pbtxt").write_text(WIDE_ROWS_CONFIG)
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:

        async def batch() -> list[InferenceResponse]:
            return await asyncio.gather(
                *(server.server.infer(make_request("wide_rows", {"X": np.array([[n]], np.float32)})) for n in range(64))
            )

        responses = server.run(batch(), timeout=30)
        for n, response in enumerate(responses):
            assert response.output("Y").data.tolist() == [[float(n)] * 1792]
        # One execution of 64: their answers went back as one message.
        (stats,) = server.server.statistics("wide_rows")
        assert [b["batch_size"] for b in stats["batch_stats"]] == [64]
    finally:
        server.close()


def test_the_process_leaves_with_its_code_even_when_model_code_closed_its_standard_streams() -> None:
    # `leave` flushes what was printed, then exits. A model that closed sys.stdout made the flush
    # raise, and the process did not exit: the server gone, it would have lived on.
    code = (
        "import sys\n"
        "from naiad_backend_python.model_side.stub_channel import leave\n"
        "print('before', flush=True)\n"
        "sys.stdout.close()\n"
        "leave(3)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (3, "before\n"), run.stderr
