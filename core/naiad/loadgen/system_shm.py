"""`SystemShmRegions`: POSIX shared-memory regions for `--shared-memory system`: every input
of every data step written once into one region, every output given room in another, both
registered with the server (the system shared-memory extension) and removed at the end."""

from __future__ import annotations

import mmap
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..datatypes import element_size
from .control import Control
from .input_tensors import InputTensor
from .load_error import LoadError
from .model_info import ModelInfo

__all__ = ["Placement", "SystemShmRegions"]

_SHM_DIR = "/dev/shm"


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one tensor lies: region name, offset and byte size."""

    region: str
    offset: int
    byte_size: int


@dataclass
class SystemShmRegions:
    # Per data step, each input's placement; each output's placement.
    inputs: list[dict[str, Placement]] = field(default_factory=list)
    outputs: dict[str, Placement] = field(default_factory=dict)
    _files: list[tuple[str, str]] = field(default_factory=list)  # (region name, /dev/shm file)

    @classmethod
    async def create(
        cls,
        control: Control,
        model: ModelInfo,
        steps: Sequence[Sequence[InputTensor]],
        batch_size: int,
        default_output_size: int,
    ) -> SystemShmRegions:
        regions = cls()
        prefix = f"naiad_perf_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        try:
            for index, step in enumerate(steps):
                raws = [tensor.raw() for tensor in step]
                name = f"{prefix}_input{index}"
                offsets = regions._write(name, raws)
                await control.register_system_shm(name, "/" + name, max(1, sum(map(len, raws))))
                regions.inputs.append(
                    {t.name: Placement(name, off, len(raw)) for t, raw, off in zip(step, raws, offsets)}
                )
            sizes = [
                _output_size(t.datatype, t.dims, model.max_batch_size, batch_size, default_output_size)
                for t in model.outputs
            ]
            name = f"{prefix}_output"
            offsets = regions._write(name, [bytes(size) for size in sizes])
            await control.register_system_shm(name, "/" + name, max(1, sum(sizes)))
            regions.outputs = {
                t.name: Placement(name, off, size) for t, size, off in zip(model.outputs, sizes, offsets)
            }
        except BaseException:
            await regions.remove(control)
            raise
        return regions

    def _write(self, name: str, parts: Sequence[bytes]) -> list[int]:
        """A new /dev/shm file holding `parts` one after the other; their offsets."""
        path = os.path.join(_SHM_DIR, name)
        size = max(1, sum(map(len, parts)))
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError as exc:
            raise LoadError(f"--shared-memory system: cannot create a region in {_SHM_DIR}: {exc.strerror}") from None
        self._files.append((name, path))
        try:
            os.ftruncate(descriptor, size)
            with mmap.mmap(descriptor, size) as memory:
                offsets, at = [], 0
                for part in parts:
                    memory[at : at + len(part)] = part
                    offsets.append(at)
                    at += len(part)
        finally:
            os.close(descriptor)
        return offsets

    async def remove(self, control: Control) -> None:
        """Unregister (best effort: the server may be gone) and delete every region."""
        for name, path in self._files:
            try:
                await control.unregister_system_shm(name)
            except (LoadError, OSError):
                pass
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._files.clear()


def _output_size(datatype: str, dims: tuple[int, ...], max_batch_size: int, batch_size: int, default: int) -> int:
    size = element_size(datatype)
    if size == 0 or any(d < 0 for d in dims):
        return default  # BYTES or a variable shape: perf_analyzer's --output-shared-memory-size
    count = 1
    for d in dims:
        count *= d
    return size * count * (batch_size if max_batch_size > 0 else 1)
