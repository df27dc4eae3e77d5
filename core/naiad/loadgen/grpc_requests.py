"""`GrpcRequestEncoder`: serialized ModelInferRequest messages, built before the step starts
(raw_input_contents, or inputs and outputs in shared memory). A sequence model's requests
are the template with their sequence parameters set."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

from ..protos import grpc_service_pb2 as pb
from .input_tensors import InputTensor
from .sequence_flags import SequenceFlags
from .system_shm import Placement

__all__ = ["GrpcRequestEncoder"]


class GrpcRequestEncoder:
    def __init__(
        self,
        model: str,
        version: str,
        inputs: Sequence[InputTensor],
        outputs: Sequence[str],
        input_placement: Mapping[str, Placement] | None = None,
        output_placement: Mapping[str, Placement] | None = None,
    ) -> None:
        request = pb.ModelInferRequest(model_name=model, model_version=version)
        for tensor in inputs:
            entry = request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=list(tensor.shape))
            if input_placement is not None:
                _place(entry.parameters, input_placement[tensor.name])
            else:
                request.raw_input_contents.append(tensor.raw())
        for name in outputs:
            output = request.outputs.add(name=name)
            if output_placement is not None:
                _place(output.parameters, output_placement[name])
        self._template = request
        self._fixed = request.SerializeToString()

    @property
    def request(self) -> bytes:
        return self._fixed

    def encode(self, sequence: SequenceFlags | None) -> bytes:
        if sequence is None:
            return self._fixed
        request = pb.ModelInferRequest()
        request.CopyFrom(self._template)
        request.parameters["sequence_id"].int64_param = sequence.sequence_id
        request.parameters["sequence_start"].bool_param = sequence.start
        request.parameters["sequence_end"].bool_param = sequence.end
        return request.SerializeToString()


def _place(parameters: MutableMapping[str, pb.InferParameter], placement: Placement) -> None:
    parameters["shared_memory_region"].string_param = placement.region
    parameters["shared_memory_byte_size"].int64_param = placement.byte_size
    parameters["shared_memory_offset"].int64_param = placement.offset
