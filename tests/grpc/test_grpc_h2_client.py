"""A differential test of naiad's own HTTP/2 server: the `h2` library (an HTTP/2 implementation
not naiad's, strict about what it receives) is the client of the gRPC port, and each call's
answer must be the answer the same request gets over HTTP/1.1 from naiad's KServe HTTP
endpoint (through tritonclient): metadata, outputs, and the error texts clients match on.
Calls share one connection, interleaved, and a large tensor crosses h2's default 64 KiB
windows, so flow control is exercised both ways."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import unquote

import h2.config
import h2.connection
import h2.events
import numpy as np
import pytest
import tritonclient.http as th
from grpc_servers import numpy_server, write_repository
from raw_http2 import grpc_message
from tritonclient.utils import InferenceServerException

from naiad.protos import grpc_service_pb2 as pb

SERVICE = "/inference.GRPCInferenceService/"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("h2client"), ["identity", "add_sub", "identity_bytes"])
    with numpy_server(repo, "--allow-http", "true") as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


@dataclass
class Answer:
    status: int
    message: str
    body: bytes


class H2Client:
    """gRPC calls over one connection driven by the h2 library."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.connection.initiate_connection()
        self.sock.sendall(self.connection.data_to_send())
        self.bodies: dict[int, bytearray] = {}
        self.trailers: dict[int, dict[str, str]] = {}  # the answer's headers and trailers
        self.ended: set[int] = set()

    def close(self) -> None:
        self.connection.close_connection()
        self.sock.sendall(self.connection.data_to_send())
        self.sock.close()

    def start(self, method: str, message) -> int:
        """Sends a unary call; returns its stream."""
        stream_id = self.connection.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", SERVICE + method),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        self.connection.send_headers(stream_id, headers)
        self.bodies[stream_id] = bytearray()
        self._send_body(stream_id, grpc_message(message))
        return stream_id

    def _send_body(self, stream_id: int, body: bytes) -> None:
        """As much as the server's windows allow at a time (h2 refuses to overrun them)."""
        while body:
            window = self.connection.local_flow_control_window(stream_id)
            size = min(len(body), window, self.connection.max_outbound_frame_size)
            if size:
                self.connection.send_data(stream_id, body[:size], end_stream=size == len(body))
                body = body[size:]
            self.sock.sendall(self.connection.data_to_send())
            if body and not size:
                self._read()
        self.sock.sendall(self.connection.data_to_send())

    def _read(self) -> None:
        data = self.sock.recv(1 << 16)
        assert data, "the server closed the connection"
        for event in self.connection.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] += event.data
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                # An error may come as gRPC's "Trailers-Only" answer: one HEADERS with both.
                fields = {name.decode(): value.decode() for name, value in event.headers}
                self.trailers.setdefault(event.stream_id, {}).update(fields)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                raise AssertionError(f"the server ended the call: {event}")
        self.sock.sendall(self.connection.data_to_send())

    def answer(self, stream_id: int) -> Answer:
        while stream_id not in self.ended:
            self._read()
        trailers = self.trailers[stream_id]
        body = bytes(self.bodies[stream_id])
        if body:
            assert body[0] == 0 and int.from_bytes(body[1:5], "big") == len(body) - 5
            body = body[5:]
        # grpc-message is percent-encoded on the wire (gRPC's PROTOCOL-HTTP2).
        return Answer(int(trailers["grpc-status"]), unquote(trailers.get("grpc-message", "")), body)

    def call(self, method: str, message) -> Answer:
        return self.answer(self.start(method, message))


@pytest.fixture()
def clients(server):
    h2_client = H2Client(server.grpc_port)
    http = th.InferenceServerClient(server.http_url)
    yield h2_client, http
    h2_client.close()
    http.close()


def infer_request(model: str, inputs: dict[str, np.ndarray]) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model)
    for name, array in inputs.items():
        datatype = "BYTES" if array.dtype == object else {"float32": "FP32", "int32": "INT32"}[str(array.dtype)]
        request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
        if array.dtype == object:
            raw = b"".join(len(item).to_bytes(4, "little") + item for item in array.ravel())
        else:
            raw = array.tobytes()
        request.raw_input_contents.append(raw)
    return request


def http_infer(http: th.InferenceServerClient, model: str, inputs: dict[str, np.ndarray]) -> th.InferResult:
    sent = []
    for name, array in inputs.items():
        datatype = "BYTES" if array.dtype == object else {"float32": "FP32", "int32": "INT32"}[str(array.dtype)]
        item = th.InferInput(name, list(array.shape), datatype)
        item.set_data_from_numpy(array, binary_data=True)
        sent.append(item)
    return http.infer(model, sent)


def grpc_outputs(answer: Answer) -> dict[str, np.ndarray]:
    assert answer.status == 0, answer.message
    response = pb.ModelInferResponse.FromString(answer.body)
    outputs = {}
    for output, raw in zip(response.outputs, response.raw_output_contents):
        if output.datatype == "BYTES":
            items, position = [], 0
            while position < len(raw):
                size = int.from_bytes(raw[position : position + 4], "little")
                items.append(raw[position + 4 : position + 4 + size])
                position += 4 + size
            array = np.array(items, dtype=object)
        else:
            array = np.frombuffer(raw, {"FP32": np.float32, "INT32": np.int32}[output.datatype])
        outputs[output.name] = array.reshape(list(output.shape))
    return outputs


INFER_CASES = {
    "identity FP32": ("identity", {"INPUT0": np.array([1.5, -2.0, 3.25], np.float32)}),
    "add_sub batch of 2": (
        "add_sub",
        {
            "INPUT0": np.arange(8, dtype=np.float32).reshape(2, 4),
            "INPUT1": np.ones((2, 4), np.float32),
        },
    ),
    "BYTES": ("identity_bytes", {"INPUT0": np.array([b"naiad", b"", b"\x00\xff"], dtype=object)}),
    # 4 MiB: past h2's 64 KiB windows and naiad's 16 KiB frames, both ways.
    "a tensor of 4 MiB": ("identity", {"INPUT0": np.arange(1 << 20, dtype=np.float32)}),
}


@pytest.mark.parametrize("model, inputs", list(INFER_CASES.values()), ids=list(INFER_CASES))
def test_infer_answers_as_over_http1(clients, model, inputs):
    h2_client, http = clients
    over_h2 = grpc_outputs(h2_client.call("ModelInfer", infer_request(model, inputs)))
    over_http = http_infer(http, model, inputs)
    assert sorted(over_h2) == sorted(output["name"] for output in over_http.get_response()["outputs"])
    for name, array in over_h2.items():
        expected = over_http.as_numpy(name)
        assert array.shape == expected.shape and array.dtype == expected.dtype
        assert np.array_equal(array, expected), name


def test_metadata_answers_as_over_http1(clients):
    h2_client, http = clients
    answer = h2_client.call("ModelMetadata", pb.ModelMetadataRequest(name="add_sub"))
    assert answer.status == 0, answer.message
    over_h2 = pb.ModelMetadataResponse.FromString(answer.body)
    over_http = http.get_model_metadata("add_sub")
    assert over_h2.name == over_http["name"] and list(over_h2.versions) == over_http["versions"]
    assert over_h2.platform == over_http["platform"]
    assert [(t.name, t.datatype, list(t.shape)) for t in over_h2.inputs] == [
        (t["name"], t["datatype"], t["shape"]) for t in over_http["inputs"]
    ]
    live = h2_client.call("ServerLive", pb.ServerLiveRequest())
    assert pb.ServerLiveResponse.FromString(live.body).live is http.is_server_live() is True


ERROR_CASES = {
    "unknown model": ("no_such_model", {"INPUT0": np.array([1.0], np.float32)}),
    "unknown input": ("identity", {"NOT_AN_INPUT": np.array([1.0], np.float32)}),
    "wrong datatype": ("identity", {"INPUT0": np.array([1], np.int32)}),
    "wrong shape": ("add_sub", {"INPUT0": np.ones((1, 3), np.float32), "INPUT1": np.ones((1, 3), np.float32)}),
}


@pytest.mark.parametrize("model, inputs", list(ERROR_CASES.values()), ids=list(ERROR_CASES))
def test_errors_carry_the_words_of_http1(clients, model, inputs):
    h2_client, http = clients
    answer = h2_client.call("ModelInfer", infer_request(model, inputs))
    with pytest.raises(InferenceServerException) as over_http:
        http_infer(http, model, inputs)
    assert answer.status != 0
    assert answer.message and answer.message == over_http.value.message()


def test_interleaved_calls_on_one_connection_each_get_their_answer(clients):
    h2_client, http = clients
    arrays = [np.full(3 + n, n, np.float32) for n in range(12)]
    streams = [h2_client.start("ModelInfer", infer_request("identity", {"INPUT0": a})) for a in arrays]
    for stream_id, array in reversed(list(zip(streams, arrays))):
        assert np.array_equal(grpc_outputs(h2_client.answer(stream_id))["OUTPUT0"], array)
    assert np.array_equal(http_infer(http, "identity", {"INPUT0": arrays[-1]}).as_numpy("OUTPUT0"), arrays[-1])
