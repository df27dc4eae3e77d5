"""deploy/kserve: the ClusterServingRuntime for naiad and the example InferenceService
(issue 19, item 3), schema-validated, and the runtime's arguments checked against
`naiad serve` and KServe's conventions."""

from pathlib import Path

import pytest
import yaml
from k8s_schemas import validate

from naiad.cli import build_parser

KSERVE = Path(__file__).resolve().parents[2] / "deploy" / "kserve"


def load(name: str) -> dict:
    (obj,) = list(yaml.safe_load_all((KSERVE / name).read_text()))
    return obj


@pytest.fixture
def runtime():
    return load("cluster-serving-runtime.yaml")


@pytest.fixture
def service():
    return load("inference-service.yaml")


def test_manifests_match_their_schemas(runtime, service):
    validate(runtime)
    validate(service)


def test_schema_catches_mistakes(runtime, service):
    runtime["spec"]["protocolVersions"].append("v3")
    with pytest.raises(Exception, match="v3"):
        validate(runtime)
    del runtime["spec"]["protocolVersions"][-1]
    runtime["spec"]["containers"][0]["argz"] = []
    with pytest.raises(Exception, match="argz"):
        validate(runtime)
    service["spec"]["predictor"]["model"]["resources"]["limits"]["cpu"] = {"cores": 2}
    with pytest.raises(Exception, match="cores"):
        validate(service)


def test_runtime_speaks_v2_on_kserve_ports(runtime):
    spec = runtime["spec"]
    assert spec["protocolVersions"] == ["v2", "grpc-v2"]
    (container,) = spec["containers"]
    assert container["name"] == "kserve-container"  # KServe merges the predictor into this name
    args = build_parser().parse_args(["serve", *container["args"]])
    # The storage initializer's download directory, and KServe's HTTP and gRPC ports.
    assert args.model_repository == ["/mnt/models"]
    assert (args.http_port, args.grpc_port, args.metrics_port) == (8080, 9000, 8002)
    assert spec["annotations"]["prometheus.kserve.io/port"] == str(args.metrics_port)
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8080}


def test_runtime_lists_every_backend_format(runtime):
    formats = {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
    # One KServe format per naiad backend, and a whole Triton repository.
    assert formats == {"triton", "onnx", "pytorch", "tensorflow", "tensorrt", "python"}
    assert not any(f["autoSelect"] for f in runtime["spec"]["supportedModelFormats"])


def test_example_names_the_runtime_and_a_format_it_serves(runtime, service):
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    served = {(f["name"], f["version"]) for f in runtime["spec"]["supportedModelFormats"]}
    assert (model["modelFormat"]["name"], model["modelFormat"]["version"]) in served
    assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]
    # KServe appends the predictor's args to the runtime's: together they must parse.
    args = build_parser().parse_args(["serve", *runtime["spec"]["containers"][0]["args"], *model["args"]])
    assert args.strict_readiness is True
