"""A message between a front door and the model home that cannot be read fails its request with
an error naming why, instead of leaving the client waiting forever; the link keeps serving."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

import pytest

from naiad.cuda_shared_memory import CudaSharedMemoryRegistry
from naiad.errors import ErrorCode, NaiadError
from naiad.workers import model_home
from naiad.workers.home_link import HomeLink
from naiad_wire.interprocess.messages import pack_frame
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd


@pytest.fixture
def rings():
    fd = create_ring_fd(1 << 16)
    try:
        yield RingWriter(fd), RingReader(fd)
    finally:
        os.close(fd)


def test_an_answer_the_front_door_cannot_read_fails_its_request(rings):
    writer, reader = rings

    async def body() -> tuple[NaiadError, BaseException | None]:
        link = HomeLink(SimpleNamespace(), writer, reader)  # type: ignore[arg-type]
        broken = link._loop.create_future()
        other = link._loop.create_future()
        link._waiting.update({7: broken, 8: other})
        # An output descriptor that is not one: the model home never sends this.
        link.data_received(pack_frame({"op": "response", "key": 7, "model": "m", "version": "1", "outputs": [("x",)]}))
        link.data_received(pack_frame({"op": "error", "key": 8, "error": ("NOT_FOUND", "no such model")}))
        with pytest.raises(NaiadError) as failed:
            await asyncio.wait_for(broken, 1)
        # Retrieved here, or asyncio reports the exception as never retrieved when `other` goes.
        return failed.value, other.exception() if other.done() else None

    error, other_error = asyncio.run(body())
    assert error.code == ErrorCode.INTERNAL
    assert error.message.startswith("the model home's answer could not be read: ")
    # The next message on the link was read as usual.
    assert isinstance(other_error, NaiadError) and other_error.code == ErrorCode.NOT_FOUND


def test_a_request_the_model_home_cannot_read_is_answered_with_an_error(rings):
    writer, reader = rings
    home = SimpleNamespace(shared_memory=SimpleNamespace(cuda=CudaSharedMemoryRegistry()))
    connection = model_home._FrontDoorConnection(home, 3, reader, writer)  # type: ignore[arg-type]
    sent: list[bytes] = []
    connection.write = lambda frame: sent.append(frame)  # type: ignore[method-assign]
    connection.data_received(pack_frame({"op": "infer", "key": 5, "model": "m", "inputs": [("x",)]}))
    assert len(sent) == 1
    assert b"the model home could not read the request: " in sent[0]
    assert b"INTERNAL" in sent[0]
