"""What one execute costs the model's process, from the server's `Execute` frame on its socket
to the `Result` frame sent back: the stub's own code (decoding, the pb_utils objects, the
model's `execute`, encoding, the send), run in this process on a socket pair and the two
shared-memory rings, without the event loop's wake-up. The model is add_sub (the one
../shared/bench serves: FP32 [16] inputs, as an HTTP body carries them).

    .venv/bin/python backends/python/bench/stub_cost.py [--batch 4] [--executes 20000]

Prints the least, 10th-percentile and median microseconds per execute. Served, the same
work costs the stub about twice as much (perf stat: 160-240 us of CPU per execute of 4-5
requests at 8 connections), with the wake-up, and caches another process left cold.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from naiad_backend_python.model_side import stub_messages as m
from naiad_backend_python.model_side.bridge import set_default_bridge
from naiad_backend_python.model_side.stub_bridge import StubBridge
from naiad_backend_python.model_side.stub_channel import Channel
from naiad_backend_python.model_side.stub_dispatcher import StubDispatcher

from naiad_wire.interprocess.messages import FrameReader, decode_array, encode_array
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from loadkit import ADD_SUB_PY  # noqa: E402 - the add_sub model.py the benchmarks serve

ARGS = {
    "model_config": json.dumps({"name": "add_sub", "max_batch_size": 64}),
    "model_instance_kind": "CPU",
    "model_instance_name": "add_sub_0",
    "model_instance_device_id": "0",
    "model_repository": ".",
    "model_version": "1",
    "model_name": "add_sub",
}


class Server:
    """The server's end: sends `Execute` frames and reads the `Result` frames back."""

    def __init__(self, sock: socket.socket, to_stub: RingWriter, from_stub: RingReader) -> None:
        self.sock, self.to_stub, self.from_stub = sock, to_stub, from_stub
        self.frames = FrameReader()
        # An HTTP body's tensor: a read-only array over the body's bytes.
        self.array = np.frombuffer(np.arange(16, dtype=np.float32).tobytes(), dtype=np.float32).reshape(1, 16)

    def send_execute(self, call_id: int, batch: int) -> None:
        def build(ring: RingWriter) -> m.Execute:
            return m.Execute(
                call_id,
                ("add_sub", 1),
                [
                    m.RequestItem(
                        key,
                        "",
                        0,
                        0,
                        0,
                        {},
                        ["OUTPUT0", "OUTPUT1"],
                        [
                            encode_array(ring, "INPUT0", "FP32", self.array),
                            encode_array(ring, "INPUT1", "FP32", self.array),
                        ],
                    )
                    for key in range(batch)
                ],
            )

        self.sock.sendall(m.pack_placing(build, self.to_stub))

    def receive(self) -> m.StubMessage:
        while True:
            bodies = self.frames.feed(self.sock.recv(1 << 16))
            if bodies:
                assert len(bodies) == 1
                return m.unpack(bodies[0])

    def read_result(self) -> list[np.ndarray]:
        result = self.receive()
        assert isinstance(result, m.Result) and result.responses is not None, result
        outputs = [decode_array(self.from_stub, d)[2] for r in result.responses if r is not None for d in r.outputs]
        self.from_stub.consumed(result.mark)
        return outputs


def main(batch: int, executes: int) -> None:
    server_sock, stub_sock = socket.socketpair()
    inbound, outbound = create_ring_fd(1 << 22), create_ring_fd(1 << 22)
    server = Server(server_sock, RingWriter(inbound), RingReader(outbound))
    channel = Channel(stub_sock, RingReader(inbound), RingWriter(outbound))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    bridge = StubBridge(channel)
    set_default_bridge(bridge)
    dispatcher = StubDispatcher(channel, bridge, loop)
    with tempfile.TemporaryDirectory() as folder:
        model_file = Path(folder) / "model.py"
        model_file.write_text(ADD_SUB_PY)
        server_sock.sendall(m.pack(m.Init(str(model_file), ARGS, False, "model 'add_sub'")))
        loop.add_reader(stub_sock.fileno(), dispatcher.read_ready)
        # initialize runs as a task on the loop: turn it until the answer is on the socket.
        while not select.select([server_sock], [], [], 0)[0]:
            loop.run_until_complete(asyncio.sleep(0.01))
        loop.remove_reader(stub_sock.fileno())
        ready = server.receive()
        assert isinstance(ready, m.Ready), ready
    samples = []
    for call_id in range(executes):
        server.send_execute(call_id, batch)
        began = time.perf_counter_ns()
        dispatcher.read_ready()  # what the loop calls when the socket is readable
        samples.append(time.perf_counter_ns() - began)
        outputs = server.read_result()
    assert np.array_equal(outputs[0], 2 * np.arange(16, dtype=np.float32).reshape(1, 16))
    samples.sort()
    least, tenth, median = (samples[int(q * (len(samples) - 1))] / 1e3 for q in (0, 0.1, 0.5))
    print(f"batch {batch}: {least:.1f} us least, {tenth:.1f} 10th percentile, {median:.1f} median per execute")
    for fd in (inbound, outbound):
        os.close(fd)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4, help="requests per execute")
    parser.add_argument("--executes", type=int, default=20000)
    arguments = parser.parse_args()
    main(arguments.batch, arguments.executes)
