"""What both protocols read from a CUDA shared-memory register request before CUDA is asked
anything: the fields' types, named when wrong (a server with CUDA gets these errors; one
without refuses every registration first, in Triton's words)."""

from __future__ import annotations

import pytest

from naiad.errors import ErrorCode, NaiadError
from naiad.frontends.kserve.shared_memory_requests import cuda_register_request


def test_a_well_formed_request_is_read():
    request = cuda_register_request("gpu", b"\1" * 64, 0, 4096)
    assert (request.name, request.raw_handle, request.device_id, request.byte_size) == ("gpu", b"\1" * 64, 0, 4096)


@pytest.mark.parametrize(
    ("device_id", "byte_size", "named"),
    [("0", 16, "'device_id'"), (0, None, "'byte_size'"), (True, 16, "'device_id'"), (0, 1.5, "'byte_size'")],
)
def test_a_field_of_the_wrong_type_is_named(device_id, byte_size, named):
    with pytest.raises(NaiadError) as info:
        cuda_register_request("gpu", b"\1" * 64, device_id, byte_size)
    assert info.value.code == ErrorCode.INVALID_ARG
    assert info.value.message.startswith(f"registering CUDA shared memory region 'gpu' needs an integer {named}")


def test_a_region_needs_a_name():
    with pytest.raises(NaiadError) as info:
        cuda_register_request("", b"\1" * 64, 0, 16)
    assert info.value.message == "'region name' is necessary to register cuda shared memory region"
