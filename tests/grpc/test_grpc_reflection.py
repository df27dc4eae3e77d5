"""gRPC server reflection, asked by grpcio's own reflection client (what grpcurl and Postman
do): the services are listed, their definitions resolve with every import, and a call built
from nothing but the reflected descriptors runs an inference."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase


@pytest.fixture
def channel(url):
    with grpc.insecure_channel(url) as channel:
        yield channel


def test_list_services(channel):
    services = ProtoReflectionDescriptorDatabase(channel).get_services()
    assert sorted(services) == [
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "inference.GRPCInferenceService",
    ]


def test_model_infer_resolves_and_runs_from_the_reflected_descriptors(channel):
    pool = DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    service = pool.FindServiceByName("inference.GRPCInferenceService")
    method = service.methods_by_name["ModelInfer"]
    assert method.input_type.full_name == "inference.ModelInferRequest"
    assert method.output_type.full_name == "inference.ModelInferResponse"
    # The service file's import (model_config.proto) came with it.
    assert pool.FindMessageTypeByName("inference.ModelConfig").fields_by_name["max_batch_size"].number == 4
    stream = service.methods_by_name["ModelStreamInfer"]
    assert stream.client_streaming and stream.server_streaming

    request_class, response_class = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
    values = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    request = request_class(model_name="identity")
    tensor = request.inputs.add(name="INPUT0", datatype="FP32")
    tensor.shape.append(3)
    request.raw_input_contents.append(values.tobytes())
    call = channel.unary_unary(
        "/inference.GRPCInferenceService/ModelInfer",
        request_serializer=request_class.SerializeToString,
        response_deserializer=response_class.FromString,
    )
    response = call(request, timeout=30)
    assert response.outputs[0].name == "OUTPUT0"
    np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[0], dtype=np.float32), values)


@pytest.mark.parametrize("version", ["v1alpha", "v1"])
def test_each_request_on_the_stream_gets_its_answer(channel, version):
    """Raw requests on one stream, under both reflection versions (same messages on the wire)."""
    info = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    asked = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="inference.GRPCInferenceService.ModelInfer"),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
        reflection_pb2.ServerReflectionRequest(file_by_filename="naiad/protos/model_config.proto"),
        reflection_pb2.ServerReflectionRequest(file_by_filename="../etc/passwd"),
        reflection_pb2.ServerReflectionRequest(all_extension_numbers_of_type="inference.ModelConfig"),
    ]
    answers = list(info(iter(asked), timeout=30))
    assert [a.original_request for a in answers] == asked
    assert [a.WhichOneof("message_response") for a in answers] == [
        "list_services_response",
        "file_descriptor_response",
        "error_response",
        "file_descriptor_response",
        "error_response",
        "all_extension_numbers_response",
    ]
    from google.protobuf import descriptor_pb2

    def names(answer):
        return sorted(
            descriptor_pb2.FileDescriptorProto.FromString(raw).name
            for raw in answer.file_descriptor_response.file_descriptor_proto
        )

    assert names(answers[1]) == ["naiad/protos/grpc_service.proto", "naiad/protos/model_config.proto"]
    assert names(answers[3]) == ["naiad/protos/model_config.proto"]
    for error, what in ((answers[2], "no.such.Symbol"), (answers[4], "../etc/passwd")):
        assert error.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
        assert what in error.error_response.error_message
    assert answers[5].all_extension_numbers_response.base_type_name == "inference.ModelConfig"
    assert list(answers[5].all_extension_numbers_response.extension_number) == []
