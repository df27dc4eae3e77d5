"""The Python-backend tests' model repository and servers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from naiad import (
    InferenceRequest,
    InferenceResponse,
    NaiadError,
    RequestedOutput,
    Server,
    ServerOptions,
    Tensor,
)

MODELS = Path(__file__).parent / "models"


T = TypeVar("T")


class ServerThread:
    """A started Server whose coroutines tests call synchronously through `run`."""

    def __init__(self, options: ServerOptions) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = Server(options)
        self.run(self.server.start())

    def run(self, coroutine: Awaitable[T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def infer(
        self, model: str, inputs: dict[str, np.ndarray], outputs: list[str] | None = None, **fields: Any
    ) -> InferenceResponse:
        request = make_request(model, inputs, outputs, **fields)
        return self.run(self.server.infer(request))

    def infer_error(self, model: str, inputs: dict[str, np.ndarray], **fields: Any) -> NaiadError:
        with pytest.raises(NaiadError) as caught:
            self.infer(model, inputs, **fields)
        return caught.value

    def stream(self, model: str, inputs: dict[str, np.ndarray], **fields: Any) -> list[InferenceResponse]:
        request = make_request(model, inputs, None, **fields)

        async def collect() -> list[InferenceResponse]:
            return [response async for response in self.server.infer_stream(request)]

        return self.run(collect())

    def close(self) -> None:
        self.run(self.server.stop(), timeout=120)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def make_request(
    model: str, inputs: dict[str, np.ndarray], outputs: list[str] | None = None, **fields: Any
) -> InferenceRequest:
    tensors = [Tensor.from_numpy(name, np.asarray(value)) for name, value in inputs.items()]
    return InferenceRequest(model, tensors, outputs=[RequestedOutput(n) for n in outputs or []], **fields)


def bytes_array(*items: bytes) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = list(items)
    return array


def process_alive(pid: int) -> bool:
    """Running: not gone, and not a zombie whose parent has yet to collect it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
