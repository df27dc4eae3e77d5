"""The model process's side of its socket to the server (`model_side.stub_channel`)."""

from __future__ import annotations

import os
import socket
import threading
import time

from naiad_backend_python.model_side import stub_messages as m
from naiad_backend_python.model_side.stub import _new_event_loop
from naiad_backend_python.model_side.stub_channel import Channel

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
