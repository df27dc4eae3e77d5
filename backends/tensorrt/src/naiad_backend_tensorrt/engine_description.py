"""What an engine says about its IO tensors, in a plain form that auto-complete, the
config check and profile selection share (and tests build directly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .dtypes import datatype_of_trt

__all__ = ["ProfileShape", "EngineTensor", "EngineDescription", "describe_engine"]


@dataclass(frozen=True, slots=True)
class ProfileShape:
    """An input's allowed shapes in one optimization profile."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def admits(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.min) and all(lo <= s <= hi for s, lo, hi in zip(shape, self.min, self.max))


@dataclass(frozen=True, slots=True)
class EngineTensor:
    """One IO tensor. `shape` uses -1 for dynamic dimensions. `profiles[i]` is the shape
    range in optimization profile i (inputs with dynamic shapes only). A shape tensor
    carries shape values, read by TensorRT from host memory."""

    name: str
    is_input: bool
    trt_dtype: str
    shape: tuple[int, ...]
    is_shape_tensor: bool = False
    on_host: bool = False
    profiles: tuple[ProfileShape, ...] = ()

    @property
    def datatype(self) -> str | None:
        return datatype_of_trt(self.trt_dtype)

    @property
    def native_type(self) -> str:
        return self.trt_dtype


@dataclass(frozen=True, slots=True)
class EngineDescription:
    tensors: tuple[EngineTensor, ...]
    num_profiles: int = 1
    by_name: dict[str, EngineTensor] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {t.name: t for t in self.tensors})

    @property
    def inputs(self) -> list[EngineTensor]:
        return [t for t in self.tensors if t.is_input]

    @property
    def outputs(self) -> list[EngineTensor]:
        return [t for t in self.tensors if not t.is_input]

    def batch_capacity(self, profiles: list[int] | None = None) -> int:
        """The largest first dimension every (non-shape) input accepts in one of
        `profiles` (all when None), or 0 when the engine cannot batch: some IO tensor has
        a fixed first dimension or no dimensions at all."""
        data = [t for t in self.tensors if not t.is_shape_tensor]
        if not data or any(not t.shape or t.shape[0] != -1 for t in data):
            return 0
        indexes = range(self.num_profiles) if profiles is None else profiles
        best = 0
        for index in indexes:
            limits = [t.profiles[index].max[0] for t in data if t.is_input and index < len(t.profiles)]
            if limits:
                best = max(best, min(limits))
        return best


def describe_engine(engine: Any) -> EngineDescription:
    """Read an `ICudaEngine` (TensorRT 8.5 or newer: named IO tensors)."""
    import tensorrt as trt

    tensors: list[EngineTensor] = []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        shape = tuple(int(d) for d in engine.get_tensor_shape(name))
        is_shape = bool(engine.is_shape_inference_io(name))
        profiles: list[ProfileShape] = []
        if is_input and not is_shape and -1 in shape:
            for profile in range(engine.num_optimization_profiles):
                low, opt, high = engine.get_tensor_profile_shape(name, profile)
                profiles.append(ProfileShape(_dims(low), _dims(opt), _dims(high)))
        tensors.append(
            EngineTensor(
                name=name,
                is_input=is_input,
                trt_dtype=engine.get_tensor_dtype(name).name,
                shape=shape,
                is_shape_tensor=is_shape,
                on_host=engine.get_tensor_location(name) == trt.TensorLocation.HOST,
                profiles=tuple(profiles),
            )
        )
    return EngineDescription(tuple(tensors), max(1, engine.num_optimization_profiles))


def _dims(dims: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in dims)
