"""What the stub's typed messages (model_side/stub_messages.py) cost beside the string-keyed
dicts they replaced, for the two messages on every request's path: `Execute` (server ->
stub) and `Result` (stub -> server) of add_sub's tensors, built, packed, unpacked and read
as each side does. CPU only, one process, no sockets: the least time over many short
windows, so other load on the machine only lengthens the windows it lands in.

    .venv/bin/python backends/python/bench/message_cost.py [--requests 1] [--windows 300]

Prints microseconds per message for each form, and the frame's size.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from naiad_backend_python.model_side import stub_messages as m

from naiad_wire.interprocess.messages import encode_array, pack_placing, unpack_message
from naiad_wire.interprocess.shm_ring import RingWriter, create_ring_fd

ARRAY = np.ones((1, 16), dtype=np.float32)


def tensors(ring: RingWriter) -> list[Any]:
    return [encode_array(ring, "INPUT0", "FP32", ARRAY), encode_array(ring, "INPUT1", "FP32", ARRAY)]


def cases(ring: RingWriter, requests: int) -> dict[str, Callable[[], object]]:
    def dict_execute() -> object:
        frame = pack_placing(
            lambda r: {
                "op": "execute",
                "id": 5,
                "model": ("add_sub", 1),
                "requests": [(k, "", 0, 0, 0, {}, ["OUTPUT0", "OUTPUT1"], tensors(r)) for k in range(requests)],
            },
            ring,
        )
        message = unpack_message(frame[4:])
        return [request[7] for request in message["requests"]], message.get("mark")

    def typed_execute() -> object:
        frame = m.pack_placing(
            lambda r: m.Execute(
                5,
                ("add_sub", 1),
                [m.RequestItem(k, "", 0, 0, 0, {}, ["OUTPUT0", "OUTPUT1"], tensors(r)) for k in range(requests)],
            ),
            ring,
        )
        message = m.unpack(frame[4:])
        assert isinstance(message, m.Execute)
        return [request.inputs for request in message.requests], message.mark

    def dict_result() -> object:
        frame = pack_placing(
            lambda r: {
                "op": "result",
                "id": 5,
                "responses": [(tensors(r), None, {}) for _ in range(requests)],
                "rescheduled": [],
            },
            ring,
        )
        message = unpack_message(frame[4:])
        return (
            [r[0] for r in message["responses"]],
            message.get("error"),
            message.get("rescheduled"),
            message.get("mark"),
        )

    def typed_result() -> object:
        frame = m.pack_placing(
            lambda r: m.Result(5, [m.ResponseItem(tensors(r), None, {}) for _ in range(requests)], []), ring
        )
        message = m.unpack(frame[4:])
        assert isinstance(message, m.Result) and message.responses is not None
        return [r.outputs for r in message.responses if r is not None], message.error, message.rescheduled, message.mark

    return {
        "dict execute": dict_execute,
        "typed execute": typed_execute,
        "dict result": dict_result,
        "typed result": typed_result,
    }


def main(requests: int, windows: int) -> None:
    fd = create_ring_fd(1 << 20)
    try:
        ring = RingWriter(fd)
        measured = cases(ring, requests)
        best = dict.fromkeys(measured, float("inf"))
        # Windows of about a millisecond: short enough that many land between other processes.
        repeat = max(1, 200 // requests)
        for _ in range(windows):
            for name, run in measured.items():
                began = time.perf_counter()
                for _ in range(repeat):
                    run()
                best[name] = min(best[name], (time.perf_counter() - began) / repeat)
        for name, seconds in best.items():
            print(f"{name:14} {seconds * 1e6:6.2f} us per message ({requests} request(s), best of {windows} windows)")
    finally:
        os.close(fd)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1, help="requests in the batch")
    parser.add_argument("--windows", type=int, default=300)
    arguments = parser.parse_args()
    main(arguments.requests, arguments.windows)
