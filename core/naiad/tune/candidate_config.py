"""A candidate as a model configuration: the fields tune changes, applied to a base config
(the server's, for the load API's override; the user's config.pbtxt, for the file tune writes).

The fields are Triton's: `instance_group[*].count`, `max_batch_size`,
`dynamic_batching.preferred_batch_size` and `.max_queue_delay_microseconds`, and the thread
parameters each framework backend reads (`intra_op_thread_count` / `inter_op_thread_count` for
ONNX Runtime, `INTRA_OP_THREAD_COUNT` / `INTER_OP_THREAD_COUNT` for PyTorch). `workers` is a
flag of `naiad serve`, not a config field, so it is not applied here.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, text_format

from ..config.model_config import PLATFORM_TO_BACKEND, int64_as_numbers
from ..protos import model_config_pb2 as pb
from .space import Candidate

__all__ = [
    "THREAD_PARAMETERS",
    "apply_candidate",
    "config_from_json",
    "config_json",
    "config_pbtxt",
    "framework_of",
]

# Per framework backend: the config parameters that carry (intra-op, inter-op) thread counts,
# as Triton's backends of that framework name them.
THREAD_PARAMETERS: dict[str, tuple[str, str]] = {
    "onnxruntime": ("intra_op_thread_count", "inter_op_thread_count"),
    "pytorch": ("INTRA_OP_THREAD_COUNT", "INTER_OP_THREAD_COUNT"),
}


def framework_of(config: pb.ModelConfig) -> str:
    """The backend a config names (`backend`, else what its `platform` means)."""
    return config.backend or PLATFORM_TO_BACKEND.get(config.platform, config.platform)


def config_from_json(data: dict[str, Any]) -> pb.ModelConfig:
    """A server's JSON form of a config (GET /v2/models/M/config). Fields this version of
    naiad does not know (a newer server's) are left out rather than refused."""
    config = pb.ModelConfig()
    json_format.ParseDict(data, config, ignore_unknown_fields=True)
    return config


def config_json(config: pb.ModelConfig) -> dict[str, Any]:
    """The JSON form the load API's `config` override takes (64-bit integers as numbers, as
    Triton writes and reads them)."""
    data = json_format.MessageToDict(config, preserving_proto_field_name=True)
    int64_as_numbers(data, config.DESCRIPTOR)
    return data


def config_pbtxt(config: pb.ModelConfig) -> str:
    return text_format.MessageToString(config)


def apply_candidate(base: pb.ModelConfig, candidate: Candidate) -> pb.ModelConfig:
    """A copy of `base` with the candidate's settings; dimensions the candidate lacks keep the
    base's values."""
    config = pb.ModelConfig()
    config.CopyFrom(base)
    instances = candidate.get("instances")
    if instances is not None:
        if not config.instance_group:
            config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU)
        for group in config.instance_group:
            group.count = instances
    largest = candidate.get("max_batch_size")
    if largest is not None:
        config.max_batch_size = largest
    preferred = candidate.get("preferred_batch_size")
    delay = candidate.get("max_queue_delay_us")
    if config.max_batch_size > 0 and not config.HasField("sequence_batching"):
        # Batching dimensions mean dynamic batching: turn it on where the base had none.
        batching = config.dynamic_batching
        batching.SetInParent()
        if preferred is not None:
            del batching.preferred_batch_size[:]
            if preferred > 0:
                batching.preferred_batch_size.append(preferred)
        else:
            # Sizes the base prefers (auto-complete fills in max_batch_size) that a smaller
            # candidate max_batch_size no longer allows: the server would refuse the config.
            kept = [size for size in batching.preferred_batch_size if size <= config.max_batch_size]
            del batching.preferred_batch_size[:]
            batching.preferred_batch_size.extend(kept)
        if delay is not None:
            batching.max_queue_delay_microseconds = delay
    names = THREAD_PARAMETERS.get(framework_of(config))
    if names is not None:
        for name, dimension in zip(names, ("intra_op_threads", "inter_op_threads")):
            threads = candidate.get(dimension)
            if threads is None:
                continue
            # 0 is "the framework's choice": the parameter is left out.
            if threads > 0:
                config.parameters[name].string_value = str(threads)
            elif name in config.parameters:
                del config.parameters[name]
    return config
