"""`LoadSpec` and `MeasureSettings`: what `measure` sends, and how it decides a step is
measured (perf_analyzer's vocabulary and defaults)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["LoadSpec", "MeasureSettings"]


@dataclass(frozen=True)
class LoadSpec:
    """What to send: one model of one server, its inputs, and how they travel."""

    # "127.0.0.1:8000" (http) or "127.0.0.1:8001" (grpc); an http:// prefix is accepted.
    url: str
    model: str
    protocol: Literal["http", "grpc"] = "http"
    model_version: str = ""
    batch_size: int = 1
    # NAME -> dims (without the batch dimension) for the model's variable dimensions.
    shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    # "random", "zero", or the path of a perf_analyzer JSON data file.
    input_data: str = "random"
    # HTTP: binary tensors (Triton's binary-tensor extension) or JSON lists.
    binary: bool = True
    shared_memory: Literal["none", "system"] = "none"
    # Requests per sequence for a sequence model; 0 takes perf_analyzer's 20 for such a model.
    sequence_length: int = 0
    # HTTP: outputs asked as binary tensors; None follows `binary`.
    binary_output: bool | None = None
    # Characters of each random BYTES element (perf_analyzer's --string-length).
    string_length: int = 128
    # Bytes of each output's region with --shared-memory system when its size is not fixed.
    output_shared_memory_size: int = 102400


@dataclass(frozen=True)
class MeasureSettings:
    """perf_analyzer's defaults: 5 s windows, stable when the last three are within 10%."""

    measurement_interval_ms: int = 5000
    stability_percentage: float = 10.0
    max_trials: int = 10
    # Stabilise on this latency percentile instead of the average.
    percentile: int | None = None
