"""One ModelStreamInfer call holds a bounded number of requests in flight: past the bound it
takes no more messages from the client (HTTP/2 flow control then makes the client wait), so
a frame packed with thousands of small requests cannot start thousands of tasks at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from numpy_backend import NumpyPlugin

from naiad import Server, ServerOptions
from naiad.frontends.grpc.service import STREAM_IN_FLIGHT, InferenceServicer
from naiad.protos import grpc_service_pb2 as pb

SLOW = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
instance_group [{count: 4 kind: KIND_CPU}]
parameters [{key:"op" value {string_value:"sleep"}}, {key:"sleep_ms" value {string_value:"20"}}]"""


class _Context:
    def invocation_metadata(self) -> list[Any]:
        return []


def _request(index: int) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name="slow", id=str(index))
    tensor = message.inputs.add(name="INPUT0", datatype="FP32", shape=[1])
    tensor.contents.fp32_contents.append(float(index))
    return message


def test_a_stream_takes_no_more_messages_than_it_may_run(tmp_path: Path) -> None:
    (tmp_path / "slow" / "1").mkdir(parents=True)
    (tmp_path / "slow" / "config.pbtxt").write_text(SLOW)
    total = STREAM_IN_FLIGHT * 4
    taken = 0
    most_ahead = 0
    answered = 0

    async def messages() -> AsyncIterator[pb.ModelInferRequest]:
        nonlocal taken, most_ahead
        for index in range(total):
            taken += 1
            # How far the server has read beyond what it answered.
            most_ahead = max(most_ahead, taken - answered)
            yield _request(index)

    async def run() -> list[str]:
        nonlocal answered
        options = ServerOptions(model_repositories=[str(tmp_path)], backend_plugins=[NumpyPlugin()])
        ids = []
        async with Server(options) as server:
            async for response in InferenceServicer(server).ModelStreamInfer(messages(), _Context()):
                assert not response.error_message, response.error_message
                answered += 1
                ids.append(response.infer_response.id)
                if answered == total:
                    break
        return ids

    ids = asyncio.run(run())
    assert sorted(ids, key=int) == [str(i) for i in range(total)]  # every request answered
    assert most_ahead <= STREAM_IN_FLIGHT + 1, most_ahead  # never more read than it may run
