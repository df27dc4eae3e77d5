"""Config `reshape` on outputs: the model produces the reshape's shape, clients see `dims`.

The input side lives in request_validation (requests are reshaped before a backend sees
them); framework backends call `apply_output_reshape` on their responses.
"""

from __future__ import annotations

from ..config.model_config import ModelConfig
from ..inference import InferenceResponse

__all__ = ["apply_output_reshape"]


def apply_output_reshape(responses: list[InferenceResponse], config: ModelConfig) -> None:
    """Reshape, in place, every output whose config entry has `reshape` to its `dims`
    (after the batch dimension for batching models)."""
    reshaped = config.derived(_reshaped_outputs)
    if not reshaped:
        return
    batching = config.max_batch_size > 0
    for response in responses:
        for tensor in response.outputs:
            dims = reshaped.get(tensor.name)
            if dims is not None:
                tensor.data = tensor.data.reshape(([tensor.data.shape[0]] if batching else []) + list(dims))
                tensor.shape = tuple(tensor.data.shape)


def _reshaped_outputs(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The dims clients see of each output the model produces in another shape."""
    return {spec.name: spec.dims for spec in config.outputs if spec.reshape is not None}
