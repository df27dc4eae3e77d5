"""`LentRegions`: the clients' CUDA shared-memory regions one execute lends to a model's process,
so that model.py reads its inputs there as GPU tensors (with FORCE_CPU_ONLY_INPUT_TENSORS "no")
and writes its GPU outputs there, device to device, instead of through the host.

What crosses is each region's CUDA IPC handle, which the model's process opens itself and
keeps open (model_side/device_memory.py). Every region lent is held (`CudaPlacement.borrowed_handle`:
unregistering it waits) until the execute's result is back; once a region is unregistered the
model's process is told to close it (`ForgetRegions`). A region unregistered before the
execute starts is not lent: its input goes through the host as any other, its output is
written by the server.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from naiad.backend import InferenceRequest as CoreRequest
from naiad.backend import Tensor as CoreTensor
from naiad_wire.interprocess.messages import encode_array
from naiad_wire.interprocess.shm_ring import RingWriter

if TYPE_CHECKING:
    from naiad.backend import CudaPlacement

__all__ = ["LentRegions", "lends_regions"]


def lends_regions(requests: list[CoreRequest], inputs_too: bool) -> bool:
    """Whether any request placed an output (or, with `inputs_too`, an input) in a CUDA region:
    only then is a `LentRegions` needed (plain loops: this runs for every batch)."""
    for request in requests:
        for output in request.outputs:
            if output.placement is not None:
                return True
        if inputs_too:
            for tensor in request.inputs:
                if tensor.placement is not None:
                    return True
    return False


class LentRegions:
    __slots__ = ("_held", "outputs", "handles", "placement")

    def __init__(self) -> None:
        self._held: ExitStack | None = None
        # Request index -> the outputs lent for it, by name: how the result's ("w",)
        # outputs are bound to where the client placed them.
        self.outputs: dict[int, dict[str, CudaPlacement]] = {}
        # The handles lent, and one placement lent (its `regions` tell of unregistering).
        self.handles: set[bytes] = set()
        self.placement: CudaPlacement | None = None

    def _handle(self, placement: CudaPlacement) -> bytes | None:
        if self._held is None:
            self._held = ExitStack()
        handle = self._held.enter_context(placement.borrowed_handle())
        if handle is not None:
            self.handles.add(handle)
            self.placement = placement
        return handle

    def input(self, ring: RingWriter, tensor: CoreTensor) -> tuple[Any, ...]:
        """The input's descriptor: its region's handle where a client placed it in one, else
        its bytes in `ring` as usual."""
        placement = tensor.placement
        if placement is not None:
            handle = self._handle(placement)
            if handle is not None:
                location = ("d", handle, placement.device_id, placement.offset)
                return (tensor.name, tensor.datatype, tensor.shape, location)
        return encode_array(ring, tensor.name, tensor.datatype, tensor.data)

    def outputs_of(self, index: int, request: CoreRequest) -> dict[str, tuple[bytes, int, int, int]]:
        """`RequestItem.placed_outputs` of request `index`: where it placed outputs on a GPU."""
        placed: dict[str, tuple[bytes, int, int, int]] = {}
        for output in request.outputs:
            placement = output.placement
            if placement is None:
                continue
            handle = self._handle(placement)
            if handle is None:
                continue
            placed[output.name] = (handle, placement.device_id, placement.offset, placement.byte_size)
            self.outputs.setdefault(index, {})[output.name] = placement
        return placed

    def release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None
