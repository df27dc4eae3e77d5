"""Between the core's types and the model API's types (server side only)."""

from __future__ import annotations

from typing import Any

from naiad.backend import (
    ErrorCode,
    NaiadError,
)
from naiad.backend import (
    InferenceRequest as CoreRequest,
)
from naiad.backend import (
    InferenceResponse as CoreResponse,
)
from naiad.backend import (
    Tensor as CoreTensor,
)
from naiad_wire.interprocess.messages import plain_parameters

from ..model_side import pb_utils as utils

__all__ = [
    "sequence_flags",
    "requested_output_names",
    "core_error",
    "core_response_from_parts",
    "utils_response_from_core",
    "core_response_from_utils",
    "FINAL_MARKER",
]

# The parameter the core puts on a bare "stream is over" response.
FINAL_MARKER = "triton_final_response"


def sequence_flags(request: CoreRequest) -> int:
    flags = 0
    if request.sequence_start:
        flags |= utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
    if request.sequence_end:
        flags |= utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
    return flags


def requested_output_names(request: CoreRequest, all_outputs: list[str]) -> list[str]:
    """What the client asked for; every output when it named none (as Triton tells models)."""
    return [o.name for o in request.outputs] or list(all_outputs)


def core_error(code_name: str, message: str) -> NaiadError:
    try:
        code = ErrorCode[code_name]
    except KeyError:
        code = ErrorCode.INTERNAL
    return NaiadError(code, message)


def core_response_from_parts(
    outputs: list[tuple[str, str, Any]], error: tuple[str, str] | None, parameters: dict[str, Any] | None
) -> CoreResponse:
    return CoreResponse(
        outputs=[CoreTensor(name, datatype, array.shape, array) for name, datatype, array in outputs],
        parameters=dict(parameters) if parameters else {},
        error=None if error is None else core_error(*error),
    )


def core_response_from_utils(response: utils.InferenceResponse) -> CoreResponse:
    error = response.error()
    return core_response_from_parts(
        [(t.name(), t.datatype(), t._host()) for t in response.output_tensors()],
        None if error is None else (error.code_name(), error.message()),
        plain_parameters(response.parameters_dict()),
    )


def utils_response_from_core(response: CoreResponse) -> utils.InferenceResponse:
    """A BLS response as the calling model sees it; a bare final marker is an empty one."""
    if response.error is not None:
        return utils.InferenceResponse(
            error=utils.TritonError.from_code_name(response.error.code.name, response.error.message)
        )
    parameters = {k: v for k, v in response.parameters.items() if k != FINAL_MARKER}
    return utils.InferenceResponse(
        [utils.Tensor(t.name, t.data, t.datatype) for t in response.outputs], parameters=parameters
    )
