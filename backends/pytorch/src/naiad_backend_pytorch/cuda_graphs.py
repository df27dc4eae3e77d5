"""CUDA graphs for PyTorch GPU instances: Triton's `optimization { cuda { graphs: true } }`,
which Triton reads only in its TensorRT backend.

On a GPU, a small batch's forward is bound by the CPU that launches its kernels, one by one
(ResNet-18 at batch 1 cost 1.3 ms of CPU on an H100, the whole of its time: docs/gpu.md). A
CUDA graph records the kernels of one forward once; replaying it launches them all with one
call. An instance captures a graph for each batch size the first time it meets it (only the
sizes `graph_spec` lists, when it lists any; the others run as before); after that, a batch
is copied into the graph's input buffers and the graph replayed on the instance's stream. The
outputs are the graph's own tensors: the instance reads them before its next batch, which is
the next thing that may overwrite them.

The graphs of one instance share one memory pool and one input buffer per input, sized for the
largest batch: an instance runs one batch at a time, so they never run at once. That is why a
graph needs inputs whose shape is fixed but for the batch (`graph_blocker`).

A forward that cannot be captured (it waits for the GPU on the host, as `.item()`, `.cpu()` or
control flow on a tensor's value do) runs as it is from then on, after one warning with
torch's reason.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from naiad.backend import ModelConfig, TensorSpec

__all__ = ["GraphPolicy", "CudaGraphs", "graph_blocker"]

log = logging.getLogger("naiad.backends.pytorch")

# TorchScript's profiling executor profiles a new input shape on its first run and runs the
# optimized graph from the second: warm-up runs before capture, so the optimized one is captured.
_WARMUP_RUNS = 3

# One capture at a time in the process: torch.cuda.graph synchronizes the device and empties
# the allocator's cache on entry, which is cheap once but should not interleave.
_CAPTURE_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class GraphPolicy:
    """What a config asks for: graphs or not, and for which batch sizes (None: every size)."""

    enabled: bool = False
    batch_sizes: frozenset[int] | None = None

    @classmethod
    def of(cls, config: ModelConfig) -> GraphPolicy:
        cuda = config.proto.optimization.cuda
        if not cuda.graphs:
            return cls()
        sizes = frozenset(spec.batch_size for spec in cuda.graph_spec)
        return cls(True, sizes or None)

    def captures(self, batch_size: int) -> bool:
        return self.enabled and (self.batch_sizes is None or batch_size in self.batch_sizes)


def graph_blocker(inputs: Iterable[TensorSpec]) -> str | None:
    """Why forward's inputs cannot feed a graph's fixed buffers, or None when they can."""
    for spec in inputs:
        if spec.datatype == "BYTES":
            return f"input '{spec.name}' is BYTES, which reaches forward as a list of strings"
        dims = spec.reshape if spec.reshape is not None else spec.dims
        if any(d < 0 for d in dims):
            return f"input '{spec.name}' has a variable dimension ({list(dims)})"
    return None


@dataclass(slots=True)
class _Graph:
    graph: torch.cuda.CUDAGraph
    inputs: list[torch.Tensor]  # views of the instance's input buffers
    outputs: Any  # what forward returned during capture: the replay writes into it


class CudaGraphs:
    """One instance's graphs, by batch size; call it where forward would be called, inside the
    instance's stream and grad mode. `args` may be on the host (pinned) or on the device."""

    def __init__(
        self,
        module: Callable[..., Any],
        device: torch.device,
        stream: torch.cuda.Stream,
        policy: GraphPolicy,
        max_batch_size: int,
        where: str,
    ) -> None:
        self._module = module
        self._device = device
        self._stream = stream
        self._policy = policy
        self._max_batch_size = max_batch_size  # 0: the model does not batch
        self._where = where  # "model 'm' instance 'i'", for the log
        self._graphs: dict[int, _Graph] = {}
        self._buffers: list[torch.Tensor] | None = None
        self._pool: Any = None
        self._failed = False

    def __call__(self, *tensors: torch.Tensor) -> Any:
        args = list(tensors)
        size = int(args[0].shape[0]) if self._max_batch_size > 0 and args else 0
        graph = self._graphs.get(size)
        if graph is None and not self._failed and self._policy.captures(size):
            graph = self._capture(size, args)
        if graph is None:
            return self._module(*[arg.to(self._device, non_blocking=True) for arg in args])
        for buffer, arg in zip(graph.inputs, args):
            buffer.copy_(arg, non_blocking=True)
        graph.graph.replay()
        return graph.outputs

    def _views(self, size: int, args: list[torch.Tensor]) -> list[torch.Tensor]:
        if self._buffers is None:
            self._buffers = [
                torch.empty(
                    (self._max_batch_size, *arg.shape[1:]) if self._max_batch_size > 0 else arg.shape,
                    dtype=arg.dtype,
                    device=self._device,
                )
                for arg in args
            ]
        return [buffer[:size] if self._max_batch_size > 0 else buffer for buffer in self._buffers]

    def _capture(self, size: int, args: list[torch.Tensor]) -> _Graph | None:
        with _CAPTURE_LOCK:
            views = self._views(size, args)
            for view, arg in zip(views, args):
                view.copy_(arg, non_blocking=True)
            # Plain runs first: a model's own error surfaces here as the batch's error, as it
            # would without graphs, and leaves nothing captured.
            for _ in range(_WARMUP_RUNS):
                self._module(*views)
            graph = torch.cuda.CUDAGraph()
            try:
                # thread_local: only this thread's calls are checked while it captures, so
                # another instance's thread may allocate and synchronize meanwhile.
                with torch.cuda.graph(graph, pool=self._pool, stream=self._stream, capture_error_mode="thread_local"):
                    outputs = self._module(*views)
            except Exception as exc:  # noqa: BLE001 - torch raises what CUDA's capture refused
                self._failed = True
                log.warning(
                    "%s runs without CUDA graphs: capturing forward failed (it must not wait for the GPU on "
                    "the host): %s",
                    self._where,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                )
                return None
            if self._pool is None:
                self._pool = graph.pool()
            captured = self._graphs[size] = _Graph(graph, views, outputs)
            log.info("%s: CUDA graph captured for batch size %d", self._where, size)
            return captured
