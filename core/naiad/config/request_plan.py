"""`RequestPlan`: what the request path reads of a model's config, read once.

Every request used to read the same protobuf fields again (the model's name for messages,
`max_batch_size`, `decoupled`, the scheduling choice, whether the response cache is on)
at about a microsecond each; the plan reads them once per config
(`ModelConfig.derived(RequestPlan.of)`), so validation and `Server.infer` only look up
attributes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model_config import ModelConfig, TensorSpec

__all__ = ["RequestPlan"]


@dataclass(frozen=True, slots=True)
class RequestPlan:
    name: str
    # "model 'NAME'", as messages name the model.
    model: str
    max_batch_size: int
    batching: bool
    decoupled: bool
    # An ensemble answers with the outputs its steps produced, not necessarily all asked for.
    ensemble: bool
    response_cache: bool
    inputs: dict[str, TensorSpec]
    input_names: tuple[str, ...]
    required_inputs: tuple[str, ...]
    # Inputs the sequence batcher fills in (implicit state and control inputs), never the client.
    sequence_provided: frozenset[str]
    outputs: frozenset[str]

    @classmethod
    def of(cls, config: ModelConfig) -> RequestPlan:
        proto = config.proto
        sequence = proto.sequence_batching
        provided = {state.input_name for state in sequence.state}
        provided.update(control.name for control in sequence.control_input)
        return cls(
            name=config.name,
            model=f"model '{config.name}'",
            max_batch_size=config.max_batch_size,
            batching=config.max_batch_size > 0,
            decoupled=config.decoupled,
            ensemble=config.scheduling == "ensemble_scheduling",
            response_cache=proto.response_cache.enable,
            inputs=dict(config.input_by_name),
            input_names=tuple(spec.name for spec in config.inputs),
            required_inputs=tuple(spec.name for spec in config.inputs if not spec.optional),
            sequence_provided=frozenset(provided),
            outputs=frozenset(config.output_by_name),
        )
