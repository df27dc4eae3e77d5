"""The rules Triton applies to a config's inputs, outputs, batch inputs and batch outputs.

Triton runs them before the model files are looked at when auto-complete is off, and after
the backend completed the config when it is on (a config may leave its tensors for the
backend to fill in). Messages carry Triton's wording, ending in `for <model>` as Triton's
do, because clients and scripts match on them; `check_io` names the model in front as well,
as every naiad config error does.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..protos import model_config_pb2 as pb
from .config_error import ConfigError

__all__ = ["check_io"]

_SINGLE_SOURCE_BATCH_INPUTS = frozenset(
    (
        pb.BatchInput.BATCH_ELEMENT_COUNT,
        pb.BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT,
        pb.BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO,
        pb.BatchInput.BATCH_MAX_ELEMENT_COUNT_AS_SHAPE,
        pb.BatchInput.BATCH_ITEM_SHAPE,
        pb.BatchInput.BATCH_ITEM_SHAPE_FLATTEN,
    )
)
_VARIABLE = -1


def check_io(proto: pb.ModelConfig, model: str) -> None:
    """Raise ConfigError for the first input, output or batch tensor Triton would refuse."""
    for io in proto.input:
        _fail_with_model(model, proto.name or model, _input_problem(io, proto))
    for out in proto.output:
        _fail_with_model(model, proto.name or model, _output_problem(out, proto))
    _fail_with_model(model, proto.name or model, _batch_io_problem(proto))


def _fail_with_model(model: str, config_name: str, problem: str | None) -> None:
    if problem is not None:
        raise ConfigError(model, f"{problem} for {config_name}")


def _input_problem(io: pb.ModelInput, proto: pb.ModelConfig) -> str | None:
    problem = _shape_problem(io, proto.max_batch_size, "model input ")
    if problem is not None:
        return problem
    if io.format in (pb.ModelInput.FORMAT_NHWC, pb.ModelInput.FORMAT_NCHW) and len(io.dims) != 3:
        return "model input NHWC/NCHW require 3 dims"
    return _tensorrt_only_problem(io, proto.platform, "input")


def _output_problem(io: pb.ModelOutput, proto: pb.ModelConfig) -> str | None:
    return _shape_problem(io, proto.max_batch_size, "model output ") or _tensorrt_only_problem(
        io, proto.platform, "output"
    )


def _tensorrt_only_problem(io: pb.ModelInput | pb.ModelOutput, platform: str, kind: str) -> str | None:
    if io.is_shape_tensor and platform != "tensorrt_plan":
        return "shape tensors are only supported for TensorRT platform"
    if io.is_non_linear_format_io:
        if platform != "tensorrt_plan":
            return "Non-linear IO format is only supported for the TensorRT platform"
        if len(io.dims) != 3:
            return f"Non-linear IO format {kind} requires 3 dims"
    return None


def _shape_problem(io: pb.ModelInput | pb.ModelOutput, max_batch_size: int, prefix: str) -> str | None:
    if not io.name:
        return prefix + "must specify 'name'"
    named = f"{prefix}'{io.name}' "
    if io.data_type == pb.TYPE_INVALID:
        return named + "must specify 'data_type'"
    has_reshape = io.HasField("reshape")
    reshape = list(io.reshape.shape)
    # naiad also takes `dims: []` with a reshape on a batching model (a per-item scalar).
    if not io.dims and not (has_reshape and max_batch_size > 0):
        return named + "must specify 'dims'"
    if has_reshape and not reshape and max_batch_size == 0:
        return named + "cannot have empty reshape for non-batching model as scalar tensors are not supported"
    if any(dim < 1 and dim != _VARIABLE for dim in io.dims):
        return named + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
    if not has_reshape:
        return None
    if any(dim < 1 and dim != _VARIABLE for dim in reshape):
        return named + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
    dims_size, reshape_size = _element_count(io.dims), _element_count(reshape)
    # An empty reshape stands for one element.
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        return named + "has different size for dims and reshape"
    if dims_size == _VARIABLE:
        # Each run of fixed dimensions between variable ones must keep its element count:
        # [2, 4, -1, 6] may become [8, -1, 1, 6].
        dims_runs, reshape_runs = _runs(io.dims), _runs(reshape)
        if len(dims_runs) != len(reshape_runs):
            return named + "has different number of variable-size dimensions for dims and reshape"
        if dims_runs != reshape_runs:
            return named + "has different size for dims and reshape"
    return None


def _element_count(dims: Sequence[int]) -> int:
    """Elements a shape holds; -1 when a dimension is variable, 0 for an empty shape."""
    if not dims:
        return 0
    count = 1
    for dim in dims:
        if dim == _VARIABLE:
            return _VARIABLE
        count *= dim
    return count


def _runs(dims: Sequence[int]) -> list[int]:
    runs, current = [], 1
    for dim in dims:
        if dim == _VARIABLE:
            runs.append(current)
            current = 1
        else:
            current *= dim
    runs.append(current)
    return runs


def _batch_io_problem(proto: pb.ModelConfig) -> str | None:
    inputs = {io.name for io in proto.input}
    outputs = {io.name for io in proto.output}
    for batch_input in proto.batch_input:
        kind = pb.BatchInput.Kind.Name(batch_input.kind)
        if batch_input.kind not in _SINGLE_SOURCE_BATCH_INPUTS:
            return f"unknown batch input kind '{kind}'"
        if len(batch_input.source_input) != 1:
            return f"batch input kind '{kind}' expects 1 source input, got {len(batch_input.source_input)}"
        if batch_input.data_type not in (pb.TYPE_INT32, pb.TYPE_FP32):
            return "batch input data type must be TYPE_INT32 or TYPE_FP32"
        for source in batch_input.source_input:
            if source not in inputs:
                return f"unknown source input name '{source}'"
    for batch_output in proto.batch_output:
        kind = pb.BatchOutput.Kind.Name(batch_output.kind)
        if batch_output.kind != pb.BatchOutput.BATCH_SCATTER_WITH_INPUT_SHAPE:
            return f"unknown batch output kind '{kind}'"
        if len(batch_output.source_input) != 1:
            return f"batch output kind '{kind}' expects 1 source input, got {len(batch_output.source_input)}"
        for source in batch_output.source_input:
            if source not in inputs:
                return f"unknown source input name '{source}'"
        targets: set[str] = set()
        for target in batch_output.target_name:
            if target not in outputs:
                return f"unknown target output name '{target}'"
            if target in targets:
                return f"target output name '{target}' can only be specified once"
            targets.add(target)
    return None
