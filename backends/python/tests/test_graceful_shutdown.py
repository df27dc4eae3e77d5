"""SIGTERM under load loses no request: every request a client wrote gets an answer. A keep-alive
connection closes only after an answer that says `Connection: close`, so its client takes the
next request elsewhere; the listening sockets close at once, so a new connection is refused
before anything is sent (safe to retry elsewhere). Requests arriving on open connections
while the server drains are served, not refused with 503."""

from __future__ import annotations

import asyncio
import json
import signal
import textwrap
import time
from pathlib import Path

import pytest
from python_backend_servers import process_alive

from naiad.testing import ServerProcess

SLOW_MODEL = textwrap.dedent("""
    import time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            time.sleep(0.02)
            return [pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]) for r in requests]
""")

CONFIG = """
name: "slow"
backend: "python"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
dynamic_batching { }
"""

BODY = json.dumps({"inputs": [{"name": "IN", "datatype": "INT64", "shape": [1, 1], "data": [1]}]}).encode()
REQUEST = (
    b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)


class Tally:
    def __init__(self) -> None:
        self.answered: dict[int, int] = {}
        self.refused = 0  # connect refused: nothing was sent
        self.told_to_close = 0  # answers that said `connection: close`
        self.lost: list[str] = []  # a request written and never answered


async def client(port: int, tally: Tally, until: float) -> None:
    """One keep-alive client in a loop: reconnects when told to, stops once refused."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            tally.refused += 1
            return
        try:
            while time.monotonic() < until:
                writer.write(REQUEST)
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                except (asyncio.IncompleteReadError, ConnectionError, TimeoutError) as exc:
                    tally.lost.append(type(exc).__name__)
                    return
                status = int(head.split(b" ", 2)[1])
                headers = head.lower()
                length = int(headers.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
                await reader.readexactly(length)
                tally.answered[status] = tally.answered.get(status, 0) + 1
                if b"connection: close" in headers:
                    tally.told_to_close += 1
                    break  # the next request goes on a new connection
        finally:
            writer.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_under_load_answers_every_request_written(tmp_path: Path, workers: int) -> None:
    (tmp_path / "slow" / "1").mkdir(parents=True)
    (tmp_path / "slow" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "slow" / "1" / "model.py").write_text(SLOW_MODEL)
    with ServerProcess(tmp_path, "--workers", str(workers)) as server:
        assert server.process is not None
        tally = Tally()

        async def load() -> None:
            until = time.monotonic() + 20
            clients = [asyncio.create_task(client(server.http_port, tally, until)) for _ in range(16)]
            await asyncio.sleep(1.5)
            server.process.send_signal(signal.SIGTERM)
            await asyncio.gather(*clients)

        asyncio.run(load())
        assert server.wait(30) == 0
    assert not tally.lost, f"{len(tally.lost)} request(s) lost: {tally.lost}; {tally.answered}"
    assert set(tally.answered) == {200}, tally.answered  # no 503 while draining
    assert tally.answered[200] > 100
    # Every client was told to go elsewhere, then found the server gone.
    assert tally.told_to_close >= 16 and tally.refused == 16


# The slow model, and a finalize that leaves a mark in the model's directory.
FINALIZING_MODEL = SLOW_MODEL + textwrap.indent(
    textwrap.dedent("""
        def initialize(self, args):
            self.mark = args["model_repository"] + "/finalized"

        def finalize(self):
            with open(self.mark, "w") as mark:
                mark.write("finalized")
    """),
    "    ",
)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stop_signal_to_the_whole_process_group_is_the_servers_to_handle(tmp_path: Path, workers: int) -> None:
    """Ctrl-C and systemd's stop (KillMode=control-group) signal every process of the group at
    once. The model processes leave the signal to the server, as Triton's stub does: the
    server drains, the model's finalize runs, and the server exits at once rather than
    waiting out a finalize that a dead process never answers."""
    (tmp_path / "slow" / "1").mkdir(parents=True)
    (tmp_path / "slow" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "slow" / "1" / "model.py").write_text(FINALIZING_MODEL)
    with ServerProcess(tmp_path, "--workers", str(workers), own_process_group=True) as server:
        tally = Tally()

        async def load() -> float:
            until = time.monotonic() + 20
            clients = [asyncio.create_task(client(server.http_port, tally, until)) for _ in range(16)]
            await asyncio.sleep(1.5)
            server.signal_group(signal.SIGTERM)
            stopped = time.monotonic()
            await asyncio.gather(*clients)
            return stopped

        stopped = asyncio.run(load())
        assert server.wait(40) == 0
        took = time.monotonic() - stopped
        log = server.log()
    assert not tally.lost, f"{len(tally.lost)} request(s) lost: {tally.lost}; {tally.answered}"
    assert set(tally.answered) == {200}, tally.answered
    mark = tmp_path / "slow" / "finalized"
    assert mark.exists() and mark.read_text() == "finalized", log
    assert "exited unexpectedly" not in log and "did not finish" not in log, log
    assert took < 15, f"the server took {took:.1f} s to stop:\n{log}"


STUCK_MODEL = textwrap.dedent("""
    import os
    import time

    class TritonPythonModel:
        def initialize(self, args):
            with open(args["model_repository"] + "/pid", "w") as mark:
                mark.write(str(os.getpid()))

        def execute(self, requests):
            time.sleep(3600)
""")


def test_a_second_interrupt_while_a_model_is_stuck_exits_at_once(tmp_path: Path) -> None:
    """The first Ctrl-C drains, which waits for the stuck request; the second ends the server
    at once, and the model's process, which left the signals to the server, leaves with it."""
    (tmp_path / "slow" / "1").mkdir(parents=True)
    (tmp_path / "slow" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "slow" / "1" / "model.py").write_text(STUCK_MODEL)
    with ServerProcess(tmp_path, own_process_group=True) as server:
        model_pid = int((tmp_path / "slow" / "pid").read_text())

        async def stuck_request() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
            writer.write(REQUEST)
            await writer.drain()
            await asyncio.sleep(1.0)  # in the model now
            server.signal_group(signal.SIGINT)
            await asyncio.sleep(1.0)
            assert server.process is not None and server.process.poll() is None  # draining
            server.signal_group(signal.SIGINT)
            writer.close()

        asyncio.run(stuck_request())
        assert server.wait(10) == 128 + signal.SIGINT
        log = server.log()
    assert "SIGINT again while shutting down: exiting now" in log, log
    deadline = time.monotonic() + 10
    while process_alive(model_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(model_pid), f"the model's process {model_pid} outlived the server"
