"""`--http-restricted-api` (and its gRPC twin, which shares the groups): a group of endpoints
answers only requests carrying the header, others get Triton's 403 / UNAVAILABLE."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from security_servers import expect_error, numpy_server

from naiad.frontends.grpc.restrictions import RPCS
from naiad.frontends.kserve.restrictions import GROUPS
from naiad.protos import grpc_service_pb2, health_pb2

ADMIN = {"admin-key": "s3cret"}


@pytest.fixture(scope="module", params=["naiad", "uvicorn"])
def restricted(request, repository: Path):
    with numpy_server(
        repository,
        "--http-server",
        request.param,
        "--http-restricted-api",
        "model-config,statistics:admin-key=s3cret",
        "--http-restricted-api",
        "inference:infer-key=go",
    ) as process:
        yield process


def _input() -> httpclient.InferInput:
    tensor = httpclient.InferInput("INPUT0", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 2), np.float32))
    return tensor


def test_restricted_groups_need_their_header(restricted):
    client = httpclient.InferenceServerClient(restricted.http_url)
    for call in (
        lambda **kw: client.get_model_config("identity", **kw),
        lambda **kw: client.get_inference_statistics("identity", **kw),
    ):
        for headers in (None, {"admin-key": "wrong"}, {"infer-key": "go"}):
            message = expect_error(
                lambda: call(headers=headers), "This API is restricted, expecting header 'admin-key'"
            )
            assert message == "This API is restricted, expecting header 'admin-key'"
        assert call(headers=ADMIN)
        assert call(headers={"Admin-Key": "s3cret"})  # header names are case-insensitive
    expect_error(lambda: client.infer("identity", [_input()]), "expecting header 'infer-key'")
    expect_error(lambda: client.infer("identity", [_input()], headers=ADMIN), "expecting header 'infer-key'")
    assert client.infer("identity", [_input()], headers={"infer-key": "go"}).as_numpy("OUTPUT0").tolist() == [[1, 1]]
    # Groups not named stay open.
    assert client.is_server_ready() and client.get_model_metadata("identity")["name"] == "identity"


def test_refusals_are_403_with_tritons_body(restricted):
    base = f"http://{restricted.http_url}/v2/models/identity"
    response = httpx.get(base + "/config")
    assert response.status_code == 403
    assert response.json() == {"error": "This API is restricted, expecting header 'admin-key'"}
    # The refusal comes before the body is looked at, on the versioned path too.
    response = httpx.post(base + "/versions/1/infer", content=b"not json")
    assert response.status_code == 403 and "'infer-key'" in response.json()["error"]


def test_every_endpoint_belongs_to_a_group(repository):
    every = ",".join(GROUPS)
    requests = [
        ("GET", "/v2/health/live"),
        ("GET", "/v2/health/ready"),
        ("GET", "/v2"),
        ("GET", "/v2/models/stats"),
        ("GET", "/v2/models/identity"),
        ("GET", "/v2/models/identity/versions/1"),
        ("GET", "/v2/models/identity/ready"),
        ("GET", "/v2/models/identity/versions/1/ready"),
        ("GET", "/v2/models/identity/config"),
        ("GET", "/v2/models/identity/versions/1/config"),
        ("GET", "/v2/models/identity/stats"),
        ("GET", "/v2/models/identity/versions/1/stats"),
        ("POST", "/v2/models/identity/infer"),
        ("POST", "/v2/models/identity/versions/1/infer"),
        ("GET", "/v2/logging"),
        ("POST", "/v2/logging"),
        ("GET", "/v2/trace/setting"),
        ("POST", "/v2/trace/setting"),
        ("GET", "/v2/models/identity/trace/setting"),
        ("POST", "/v2/repository/index"),
        ("POST", "/v2/repository/models/identity/load"),
        ("POST", "/v2/repository/models/identity/unload"),
        ("GET", "/v2/systemsharedmemory/status"),
        ("GET", "/v2/systemsharedmemory/region/r/status"),
        ("POST", "/v2/systemsharedmemory/region/r/register"),
        ("POST", "/v2/systemsharedmemory/region/r/unregister"),
        ("POST", "/v2/systemsharedmemory/unregister"),
        ("GET", "/v2/cudasharedmemory/status"),
        ("GET", "/v2/cudasharedmemory/region/r/status"),
        ("POST", "/v2/cudasharedmemory/region/r/register"),
        ("POST", "/v2/cudasharedmemory/region/r/unregister"),
        ("POST", "/v2/cudasharedmemory/unregister"),
    ]
    with numpy_server(repository, "--http-restricted-api", f"{every}:k=v") as process:
        with httpx.Client(base_url=f"http://{process.http_url}") as client:
            for method, path in requests:
                assert client.request(method, path).status_code == 403, (method, path)
            assert client.get("/v2/health/ready", headers={"k": "v"}).status_code == 200


def test_every_rpc_belongs_to_one_group():
    assert tuple(RPCS) == GROUPS
    grouped = [rpc for rpcs in RPCS.values() for rpc in rpcs]
    served = [m.name for m in grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods]
    served += [m.name for m in health_pb2.DESCRIPTOR.services_by_name["Health"].methods]
    assert sorted(grouped) == sorted(served)


@pytest.mark.parametrize(
    "values, message",
    [
        (["admin:key=value"], "--http-restricted-api: unknown restricted api 'admin'"),
        (["health:key"], "--http-restricted-api: expected APIS:KEY=VALUE, got 'health:key'"),
        (["trace:a=1", "trace,logging:b=2"], "restricted api 'trace' can not be specified in multiple config groups"),
    ],
)
def test_bad_flag_values_are_refused(repository, values, message):
    flags = [flag for value in values for flag in ("--http-restricted-api", value)]
    with pytest.raises(RuntimeError, match=message):
        numpy_server(repository, *flags).start()
