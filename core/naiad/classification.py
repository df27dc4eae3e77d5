"""Triton's classification extension: an output asked for with `classification: N` is
answered with its N largest values as strings "value:index[:label]" instead of the tensor.

Applied by the server where it selects the outputs a client asked for, so HTTP, gRPC and
in-process callers get the same answer. Labels come from the output's `label_filename`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .config.model_config import ModelConfig
from .errors import NaiadError
from .inference import InferenceRequest, InferenceResponse, RequestedOutput
from .tensor import Tensor

__all__ = ["MAX_CLASSIFICATION", "classification_count", "classify_tensor", "apply_classification"]

# The most classes one output may ask for, as Triton caps it: every class becomes a string
# in the answer, so an unbounded count lets one request build an answer of any size.
MAX_CLASSIFICATION = 1_000_000


def classification_count(output: RequestedOutput) -> int:
    """The N of `classification: N` on a requested output; 0 when it asks for the tensor
    (as Triton, `classification: 0` means no classification). Raises INVALID_ARG for
    anything but a non-negative integer up to MAX_CLASSIFICATION."""
    value: Any = output.parameters.get("classification")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NaiadError.invalid(
            f"output '{output.name}': 'classification' must be a non-negative integer (the number of classes; "
            f"0 returns the tensor itself), got {value!r}"
        )
    if value > MAX_CLASSIFICATION:
        raise NaiadError.invalid(
            f"output '{output.name}': 'classification' asks for {value} classes; at most {MAX_CLASSIFICATION} "
            "may be requested"
        )
    return value


def classify_tensor(tensor: Tensor, count: int, labels: tuple[str, ...] | None, batched: bool) -> Tensor:
    """The top `count` classes of `tensor` (per batch entry when `batched`) as a BYTES tensor
    of shape [batch, k] (or [k]); k is `count` capped at the number of classes."""
    if tensor.datatype == "BYTES":
        raise NaiadError.invalid(f"output '{tensor.name}': classification needs a numeric output, it is BYTES")
    data = tensor.data
    if tensor.datatype == "BF16":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    rows = data.reshape(data.shape[0] if batched and data.ndim else 1, -1)
    k = min(count, rows.shape[1])
    # A stable sort on the negated values keeps the lower index first among equal values.
    order = np.argsort(-rows.astype(np.float64), axis=1, kind="stable")[:, :k]
    result = np.empty(rows.shape[0] * k, dtype=object)
    # Floating-point scores print with six decimals, integer ones as integers (as Triton).
    as_float = rows.dtype.kind == "f"
    position = 0
    for row, indices in zip(rows, order):
        for index in indices:
            value = row[index]
            text = f"{float(value):f}:{int(index)}" if as_float else f"{int(value)}:{int(index)}"
            if labels is not None and index < len(labels):
                text += f":{labels[index]}"
            result[position] = text.encode("utf-8")
            position += 1
    shape = (rows.shape[0], k) if batched else (k,)
    return Tensor(tensor.name, "BYTES", shape, result.reshape(shape))


def apply_classification(response: InferenceResponse, request: InferenceRequest, config: ModelConfig) -> None:
    """Replace each output the request asked to classify by its classes, in place."""
    counts = {o.name: classification_count(o) for o in request.outputs}
    if not any(counts.values()):
        return
    batched = config.max_batch_size > 0
    for position, tensor in enumerate(response.outputs):
        count = counts.get(tensor.name, 0)
        if count:
            spec = config.output_by_name.get(tensor.name)
            labels = spec.labels if spec is not None else None
            response.outputs[position] = classify_tensor(tensor, count, labels, batched)
