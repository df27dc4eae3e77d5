"""The defaults Triton writes into a model's configuration when it loads the model.

Clients read the loaded config back (`GET /v2/models/{m}/config`, gRPC ModelConfig) and
see these values filled in, so naiad fills the same ones: the version policy, named and
counted instance groups with a concrete kind, the backend's default model file name,
pinned-memory optimisation flags, the preferred batch size of a dynamic batcher and of
the sequence batcher's `oldest` strategy, and a sequence batcher's idle timeout. Filling them does not
change behaviour: each equals what the server does when the field is absent (an ONNX Runtime or
TensorFlow CPU group without a count has two instances, as in Triton).
"""

from __future__ import annotations

from ..protos import model_config_pb2 as pb

__all__ = ["fill_config_defaults"]

# Triton's default for sequence_batching.max_sequence_idle_microseconds.
DEFAULT_SEQUENCE_IDLE_US = 1_000_000


def fill_config_defaults(proto: pb.ModelConfig, model: str, default_model_filename: str, gpus: list[int]) -> None:
    """Fill, in place, the fields Triton fills at load for `model`; `gpus` are the GPUs
    KIND_AUTO may use."""
    if not proto.name:
        proto.name = model
    if proto.version_policy.WhichOneof("policy_choice") is None:
        proto.version_policy.latest.num_versions = 1
    if proto.platform == "ensemble":
        # An ensemble has no instances, files or batching of its own: Triton fills no more.
        return
    # Triton names the PyTorch file only when the config named the backend without a
    # platform (`resolve_backend` does that); the backend still opens its default file.
    if not proto.default_model_filename and default_model_filename and proto.backend != "pytorch":
        proto.default_model_filename = default_model_filename
    _fill_instance_groups(proto, gpus)
    optimization = proto.optimization
    if not optimization.HasField("input_pinned_memory"):
        optimization.input_pinned_memory.enable = True
    if not optimization.HasField("output_pinned_memory"):
        optimization.output_pinned_memory.enable = True
    if proto.HasField("dynamic_batching") and proto.max_batch_size > 0:
        if not proto.dynamic_batching.preferred_batch_size:
            proto.dynamic_batching.preferred_batch_size.append(proto.max_batch_size)
    if proto.HasField("sequence_batching") and proto.sequence_batching.max_sequence_idle_microseconds == 0:
        proto.sequence_batching.max_sequence_idle_microseconds = DEFAULT_SEQUENCE_IDLE_US
    oldest = proto.sequence_batching.oldest if proto.sequence_batching.HasField("oldest") else None
    if oldest is not None and proto.max_batch_size > 0 and not oldest.preferred_batch_size:
        oldest.preferred_batch_size.append(proto.max_batch_size)


def _fill_instance_groups(proto: pb.ModelConfig, gpus: list[int]) -> None:
    if not proto.instance_group:
        # The one implicit group is named after the model, as Triton names it.
        proto.instance_group.add(name=proto.name)
    for index, group in enumerate(proto.instance_group):
        if not group.name:
            group.name = f"{proto.name}_{index}"
        if group.kind == pb.ModelInstanceGroup.KIND_AUTO:
            listed_missing = any(g not in gpus for g in group.gpus)
            cpu = not gpus or listed_missing
            group.kind = pb.ModelInstanceGroup.KIND_CPU if cpu else pb.ModelInstanceGroup.KIND_GPU
        if group.count < 1:
            group.count = _default_count(group, proto.backend)
        if group.kind == pb.ModelInstanceGroup.KIND_GPU and not group.gpus:
            group.gpus.extend(gpus)


# The backends whose CPU groups Triton gives two instances by default; it leaves the others
# at one because an instance costs them much (PyTorch, OpenVINO).
TWO_CPU_INSTANCE_BACKENDS = frozenset(("onnxruntime", "tensorflow"))


def _default_count(group: pb.ModelInstanceGroup, backend: str) -> int:
    if group.kind == pb.ModelInstanceGroup.KIND_CPU and backend in TWO_CPU_INSTANCE_BACKENDS:
        return 2
    return 1
