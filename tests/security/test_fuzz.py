"""A bounded, deterministic fuzz of what clients send (naiad issue #34).

One real `naiad serve` (explicit model control, client shared memory on) serves the models of
fuzz_models.py; hypothesis (derandomized: the same cases on every run) turns valid requests
into broken ones (fuzz_cases.py, fuzz_mutations.py) and sends them over real sockets:

1. HTTP JSON infer bodies, mutated in structure and in bytes;
2. binary-tensor bodies: the JSON header, `binary_data_size`, `Inference-Header-Content-Length`
   and the bytes after the header; and raw binary requests;
3. config overrides of `POST /v2/repository/models/{m}/load` (and gRPC's RepositoryModelLoad);
4. gRPC ModelInferRequest messages, mutated field by field (and byte by byte), unary and on
   one stream.

Every answer must be what the design promises for bad input: a client error (HTTP 4xx with
`{"error": "..."}`, a gRPC status other than a server fault) whose message names what was
wrong (not empty, no traceback, not an exception's name alone, no server path), no dropped
connection, no answer later than 5 s, a request that is still valid answered with success,
and the server alive, its log free of tracebacks, and serving a valid request afterwards.
The only 5xx allowed are named below, each a documented answer: Triton's failed-poll 500 for
an override that is no JSON object, a model this machine cannot serve (503, 501), and the
one way the fuzz's identity models can fail (an output of an input the request left out).

NAIAD_FUZZ_SCALE=N runs N times as many cases; NAIAD_FUZZ_SEED=S draws other cases than CI's
(both for looking harder on one's own machine)."""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from fuzz_cases import (
    SHM_REGION,
    SHM_SIZE,
    GrpcCase,
    HttpCase,
    config_override,
    grpc_config_override,
    grpc_infer,
    grpc_stream,
    http_binary_infer,
    http_json_infer,
    http_raw_infer,
    valid_grpc_request,
)
from fuzz_models import FuzzModel, json_data, write_fuzz_repository
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import naiad
from naiad.protos import grpc_service_pb2 as pb
from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parents[1]
# A request answered later than this is a hang.
TIMEOUT_S = 5.0
SCALE = float(os.environ.get("NAIAD_FUZZ_SCALE", "1"))
SEED = os.environ.get("NAIAD_FUZZ_SEED")
GRPC_SERVICE = "/inference.GRPCInferenceService/"
# gRPC statuses that are the server's fault, as a 5xx is over HTTP (UNIMPLEMENTED is 501).
SERVER_FAULTS = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.DATA_LOSS,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}
# Triton's answer to a config override that is not a JSON object (docs/http.md): a 500 its
# clients match on.
FAILED_POLL = re.compile(r"failed to load '\w+', failed to poll from model repository: ")
# A model this machine cannot serve, UNAVAILABLE / 503 on purpose (docs/backends/tensorrt.md):
# a TensorRT override without a GPU, a known backend whose package is not installed.
CANNOT_SERVE_HERE = re.compile(
    r"model '\w+': TensorRT plan models need an NVIDIA GPU|backend '\w+' is not installed .*pip install"
)
# A model no naiad serves, UNSUPPORTED / 501 on purpose (docs/backends/caffe2.md).
NOT_SERVED = re.compile(r"Caffe2 NetDef models \(platform caffe2_netdef\) cannot be served")
# The 5xx answers a load may give, by status.
LOAD_5XX = {500: FAILED_POLL, 501: NOT_SERVED, 503: CANNOT_SERVE_HERE}
LOAD_FAULTS = {
    grpc.StatusCode.INTERNAL: FAILED_POLL,
    grpc.StatusCode.UNIMPLEMENTED: NOT_SERVED,
    grpc.StatusCode.UNAVAILABLE: CANNOT_SERVE_HERE,
}
# The one failure of the fuzz's own models: asked for the output of an optional input the
# request left out, an identity model has nothing to answer with (np_types, whose inputs are
# all optional). That is the model breaking its contract: INTERNAL, 500.
MODEL_FAILURE = re.compile(r"model '[^']*' did not produce requested output\(s\) \[")


def fuzz(examples: int, cases: st.SearchStrategy[Any], check: Callable[[Any], str]) -> None:
    """Send `examples` cases (times NAIAD_FUZZ_SCALE) drawn from `cases` through `check`: the
    same ones on every run unless NAIAD_FUZZ_SEED asks for others. No shrinking: a failing
    case is reported as it was drawn, at once, rather than after minutes of replays against
    the server. `check` says how the server answered ("ok" or "refused"): a fuzz whose cases
    all pass, or all fail, has stopped testing what it is for."""
    wanted = max(1, int(examples * SCALE))
    outcomes: collections.Counter[str] = collections.Counter()

    @settings(
        max_examples=wanted,
        derandomize=SEED is None,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(cases)
    def run(case: Any) -> None:
        outcomes[check(case)] += 1

    (run if SEED is None else seed(int(SEED))(run))()
    ran = sum(outcomes.values())
    print(f"{ran} cases: {dict(outcomes)}")
    # Hypothesis skips a case it drew before: most must still be new, or the fuzz shrank.
    assert ran >= 0.9 * wanted, f"only {ran} of {wanted} cases ran"
    assert min(outcomes["ok"], outcomes["refused"]) >= 0.05 * ran, dict(outcomes)


# -- the server ---------------------------------------------------------------------------


class FuzzServer:
    def __init__(self, process: ServerProcess, models: list[FuzzModel], targets: list[str], repository: Path) -> None:
        self.process = process
        self.models = models
        self.config_targets = targets
        # Texts no answer may show a client: where the server's files are.
        # (The temporary directory too: files a load uploads are written under it.)
        self.private = [
            str(repository),
            sys.prefix,
            str(Path(naiad.__file__).resolve().parents[1]),
            tempfile.gettempdir().rstrip("/") + "/",
        ]
        self.http = HttpClient(process.http_port)
        self.channel = grpc.insecure_channel(process.grpc_url)

    def alive(self) -> None:
        assert self.process.process is not None
        assert self.process.process.poll() is None, "the server exited:\n" + self.process.log()[-5000:]


@contextlib.contextmanager
def serve(repository: Path) -> Iterator[FuzzServer]:
    """`naiad serve` on the fuzz's models, with a registered shared-memory region."""
    models, targets = write_fuzz_repository(repository)
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    region = shared_memory.SharedMemory(create=True, size=SHM_SIZE)
    region.buf[:SHM_SIZE] = bytes(SHM_SIZE)
    process = ServerProcess(
        repository,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-metrics",
        "false",
        "--model-control-mode",
        "explicit",
        "--load-model",
        "*",
        "--allow-client-shm=true",
        env={"PYTHONPATH": pythonpath},
    )
    try:
        with process:
            fuzz_server = FuzzServer(process, models, targets, repository)
            status, _, body = fuzz_server.http.send(
                "POST",
                f"/v2/systemsharedmemory/region/{SHM_REGION}/register",
                json.dumps({"key": "/" + region.name.lstrip("/"), "offset": 0, "byte_size": SHM_SIZE}).encode(),
            )
            assert status == 200, body
            yield fuzz_server
            fuzz_server.channel.close()
            fuzz_server.alive()
            log = process.log()
            # An exception that no layer turned into a NaiadError is logged with its traceback.
            assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:8000]
    finally:
        region.close()
        region.unlink()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzServer]:
    with serve(tmp_path_factory.mktemp("fuzz-models")) as fuzz_server:
        yield fuzz_server


class HttpClient:
    """One keep-alive connection; a dropped connection or a late answer fails the case."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)

    def send(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        try:
            self.connection.request(method, path, body=body, headers=headers or {})
            response = self.connection.getresponse()
            content = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.connection.close()
            raise AssertionError(f"no answer (in {TIMEOUT_S}s) to {method} {path}: {exc!r}") from None
        if response.will_close:
            self.connection.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, content


# -- what an answer must be -----------------------------------------------------------------

_EXCEPTION_ONLY = re.compile(r"^\s*[\w.]*(Error|Exception|Exit|Interrupt)\b\s*(\(.*\))?:?\s*$", re.S)


def check_message(message: object, server: FuzzServer, what: str) -> None:
    """An error message names what was wrong: text, not a traceback, not an exception's
    name or repr alone, not naiad's "internal error" of an exception nobody handled, no
    server paths."""
    assert isinstance(message, str) and message.strip(), f"{what}: empty error message {message!r}"
    assert len(message.strip()) >= 10 and re.search(r"[A-Za-z]{3}", message), f"{what}: says nothing: {message!r}"
    assert "Traceback" not in message and 'File "' not in message, f"{what}: a traceback: {message[:2000]}"
    assert not _EXCEPTION_ONLY.match(message), f"{what}: only an exception's name: {message!r}"
    assert not message.startswith("internal error:"), f"{what}: an unhandled exception: {message[:2000]}"
    assert "site-packages" not in message, f"{what}: names server files: {message[:2000]}"
    for private in server.private:
        assert private not in message, f"{what}: names the server path {private}: {message[:2000]}"


def check_http(
    case: HttpCase,
    answer: tuple[int, dict[str, str], bytes],
    server: FuzzServer,
    allowed: dict[int, re.Pattern[str]] | None = None,
) -> str:
    status, headers, body = answer
    what = f"{case!r} -> {status} {body[:1000]!r}"
    if status >= 400:
        assert headers.get("content-type", "").startswith("application/json"), what
        try:
            document = json.loads(body)
        except ValueError:
            raise AssertionError(f"the error body is not JSON: {what}") from None
        assert isinstance(document, dict) and list(document) == ["error"], what
        message = document["error"]
        # Triton's answer to a path no endpoint has (an empty model name, a version that is no number).
        if not (status == 404 and message == "Not Found"):
            check_message(message, server, what)
        assert case.mutations, f"a valid request was refused: {what}"
        if status >= 500:
            if status == 500 and MODEL_FAILURE.match(message):
                return "model failure"
            known = (allowed or {}).get(status)
            assert known is not None and known.match(message), f"a server error: {what}"
        return "refused"
    assert status == 200, what
    header_length = headers.get("inference-header-content-length")
    if header_length is None:
        document = json.loads(body) if body else None
    else:
        assert 0 < int(header_length) <= len(body), what
        document = json.loads(body[: int(header_length)])
    if case.path.endswith("/infer"):
        assert isinstance(document, dict) and isinstance(document.get("outputs"), list), what
    return "ok"


def check_grpc_error(
    error: grpc.RpcError,
    case: GrpcCase,
    server: FuzzServer,
    allowed: dict[grpc.StatusCode, re.Pattern[str]] | None = None,
) -> str:
    code, details = error.code(), error.details()
    what = f"{case!r} -> {code} {details!r}"
    if (
        case.raw
        and code == grpc.StatusCode.INTERNAL
        and (details or "").startswith("failed to parse the request message")
    ):
        # gRPC's own status for a message that does not parse (grpc-go, grpc-java and
        # grpc C++ answer INTERNAL too).
        return "refused"
    assert case.mutations, f"a valid request was refused: {what}"
    check_message(details, server, what)
    if code == grpc.StatusCode.INTERNAL and MODEL_FAILURE.match(details or ""):
        return "model failure"
    known = (allowed or {}).get(code)
    assert code not in SERVER_FAULTS or (known is not None and known.match(details or "")), f"a server fault: {what}"
    return "refused"


# -- the fuzz -------------------------------------------------------------------------------


@pytest.mark.slow
def test_http_json_infer_bodies(server: FuzzServer) -> None:
    def check(case: HttpCase) -> str:
        return check_http(case, server.http.send(case.method, case.path, case.body, case.headers), server)

    fuzz(1500, http_json_infer(server.models), check)
    after_fuzz(server)


@pytest.mark.slow
def test_http_binary_tensor_bodies(server: FuzzServer) -> None:
    def check(case: HttpCase) -> str:
        return check_http(case, server.http.send(case.method, case.path, case.body, case.headers), server)

    fuzz(1200, st.one_of(http_binary_infer(server.models), http_raw_infer(server.models)), check)
    after_fuzz(server)


@pytest.mark.slow
def test_config_overrides(server: FuzzServer) -> None:
    loads = grpc_unary(server, "RepositoryModelLoad", pb.RepositoryModelLoadResponse)

    def check(case: HttpCase | GrpcCase) -> str:
        if isinstance(case, GrpcCase):
            try:
                loads(case.payloads[0], timeout=TIMEOUT_S)
            except grpc.RpcError as error:
                return check_grpc_error(error, case, server, LOAD_FAULTS)
        else:
            answer = server.http.send(case.method, case.path, case.body, case.headers)
            outcome = check_http(case, answer, server, LOAD_5XX)
            if outcome != "ok":
                return outcome
        # A configuration the server took is one it can describe.
        model = case.model
        status, _, body = server.http.send("GET", f"/v2/models/{model}/config")
        assert status == 200 and json.loads(body)["name"] == model, body
        assert server.http.send("GET", f"/v2/models/{model}/ready")[0] == 200
        return "ok"

    targets = server.config_targets
    fuzz(500, st.one_of(*[config_override(targets)] * 3, grpc_config_override(targets)), check)
    # Each model's own config.pbtxt loads again after every override.
    for model in targets:
        assert server.http.send("POST", f"/v2/repository/models/{model}/load", b"{}")[0] == 200
    after_fuzz(server)


@pytest.mark.slow
def test_grpc_model_infer_requests(server: FuzzServer) -> None:
    infer = grpc_unary(server, "ModelInfer", pb.ModelInferResponse)

    def check(case: GrpcCase) -> str:
        try:
            response = infer(case.payloads[0], timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            return check_grpc_error(error, case, server)
        assert len(response.raw_output_contents) == len(response.outputs), case
        return "ok"

    fuzz(1500, grpc_infer(server.models), check)
    after_fuzz(server)


def test_grpc_stream_requests(server: FuzzServer) -> None:
    stream = server.channel.stream_stream(
        GRPC_SERVICE + "ModelStreamInfer",
        request_serializer=lambda payload: payload,
        response_deserializer=pb.ModelStreamInferResponse.FromString,
    )

    def check(case: GrpcCase) -> str:
        try:
            responses = list(stream(iter(case.payloads), timeout=TIMEOUT_S))
        except grpc.RpcError as error:
            raise AssertionError(f"the stream ended with {error.code()} {error.details()!r}: {case!r}") from None
        # One answer per request (no model here is decoupled): a response or an error.
        assert len(responses) == len(case.payloads), (case, responses)
        refused = False
        for response in responses:
            if response.error_message:
                check_message(response.error_message, server, f"{case!r} -> {response.error_message!r}")
                refused = True
        return "refused" if refused else "ok"

    fuzz(300, grpc_stream(server.models), check)
    after_fuzz(server)


def grpc_unary(server: FuzzServer, method: str, response: Any) -> Any:
    return server.channel.unary_unary(
        GRPC_SERVICE + method, request_serializer=lambda payload: payload, response_deserializer=response.FromString
    )


def after_fuzz(server: FuzzServer) -> None:
    """The server is alive and answers a valid request of every model, both protocols."""
    server.alive()
    rng = np.random.default_rng(0)
    infer = grpc_unary(server, "ModelInfer", pb.ModelInferResponse)
    for model in server.models:
        inputs = [
            {"name": spec.name, "datatype": spec.datatype, "shape": list(shape), "data": json_data(spec.datatype, data)}
            for spec, shape, data in model.valid_inputs(rng)
        ]
        status, _, body = server.http.send(
            "POST",
            f"/v2/models/{model.name}/infer",
            json.dumps({"inputs": inputs, "parameters": model.parameters}).encode(),
        )
        assert status == 200, (model.name, body)
        message = valid_grpc_request(model, rng, 1, typed=False, shm_input=False)
        assert infer(message.SerializeToString(), timeout=TIMEOUT_S).model_name == model.name
