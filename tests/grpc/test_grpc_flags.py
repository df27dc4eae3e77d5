"""`naiad serve`'s gRPC flags: message size limits, compression, keepalive, header
forwarding, port reuse and TLS, each observed through a client."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tg
from grpc_servers import numpy_server, write_repository
from tritonclient.utils import InferenceServerException


def fp32(values):
    tensor = tg.InferInput("INPUT0", [len(values)], "FP32")
    tensor.set_data_from_numpy(np.asarray(values, np.float32))
    return [tensor]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A server with every gRPC tuning flag set to a non-default value."""
    repo = write_repository(tmp_path_factory.mktemp("flags"), ["identity", "parameters"])
    flags = [
        "--grpc-max-message-size",
        "4096",
        "--grpc-infer-response-compression-level",
        "high",
        "--grpc-keepalive-time",
        "10000",
        "--grpc-keepalive-timeout",
        "5000",
        "--grpc-keepalive-permit-without-calls",
        "true",
        "--grpc-http2-max-pings-without-data",
        "0",
        "--grpc-http2-min-recv-ping-interval-without-data",
        "5000",
        "--grpc-http2-max-ping-strikes",
        "0",
        "--grpc-max-connection-age",
        "600000",
        "--grpc-max-connection-age-grace",
        "10000",
        "--grpc-header-forward-pattern",
        "^x-tenant",
        "--grpc-restricted-protocol",
        "model-config,statistics:admin-key=s3cret",
        "--grpc-restricted-protocol",
        "logging:log-key=1",
    ]
    with numpy_server(repo, *flags) as process:
        yield process


def test_message_size_limit(tuned):
    with tg.InferenceServerClient(tuned.grpc_url) as client:
        np.testing.assert_array_equal(client.infer("identity", fp32(range(100))).as_numpy("OUTPUT0"), range(100))
        with pytest.raises(InferenceServerException) as info:
            client.infer("identity", fp32(range(2000)))  # 8000 bytes > 4096
        assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        assert client.is_server_live()


def test_compressed_responses_are_read_by_the_client(tuned):
    values = np.zeros(800, np.float32)  # compressible; ~3.2 kB stays under the 4 kB limit
    with tg.InferenceServerClient(tuned.grpc_url) as client:
        for algorithm in (None, "gzip", "deflate"):
            result = client.infer("identity", fp32(values), compression_algorithm=algorithm)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values)


class ByteCountingProxy:
    """A loopback TCP proxy that counts the bytes the server sends back."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.downstream = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        client, _ = self.listener.accept()
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        try:
            while data := source.recv(65536):
                if count:
                    self.downstream += len(data)
                sink.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


def test_response_compression_level_shrinks_responses(tuned):
    proxy = ByteCountingProxy(tuned.grpc_port)
    try:
        with tg.InferenceServerClient(f"127.0.0.1:{proxy.port}") as client:
            zeros = np.zeros(1000, np.float32)  # 4000 bytes of tensor data, very compressible
            result = client.infer("identity", fp32(zeros))
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), zeros)
        assert proxy.downstream < 2000, proxy.downstream
    finally:
        proxy.close()


def test_header_forward_pattern(tuned):
    with tg.InferenceServerClient(tuned.grpc_url) as client:
        result = client.infer("parameters", fp32([1]), headers={"x-tenant-id": "blue", "x-other": "no"})
        assert json.loads(result.as_numpy("OUTPUT0")[0]) == {"x-tenant-id": "blue"}
        queue: list = []
        client.start_stream(
            callback=lambda result, error: queue.append((result, error)), headers={"x-tenant-id": "green"}
        )
        client.async_stream_infer("parameters", fp32([1]))
        client.stop_stream()
        ((result, error),) = queue
        assert error is None and json.loads(result.as_numpy("OUTPUT0")[0]) == {"x-tenant-id": "green"}


def test_restricted_protocols(tuned):
    with tg.InferenceServerClient(tuned.grpc_url) as client:
        for call, name_of in (
            (lambda **kw: client.get_model_config("identity", **kw), lambda answer: answer.config.name),
            (
                lambda **kw: client.get_inference_statistics("identity", **kw),
                lambda answer: answer.model_stats[0].name,
            ),
        ):
            for headers in (None, {"admin-key": "s3cret"}, {"triton-grpc-protocol-admin-key": "wrong"}):
                with pytest.raises(InferenceServerException) as info:
                    call(headers=headers)
                assert info.value.status() == "StatusCode.UNAVAILABLE"
                assert info.value.message() == (
                    "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"
                )
            assert name_of(call(headers={"triton-grpc-protocol-admin-key": "s3cret"})) == "identity"
        with pytest.raises(InferenceServerException) as info:
            client.get_log_settings(headers={"triton-grpc-protocol-admin-key": "s3cret"})
        assert "'triton-grpc-protocol-log-key'" in info.value.message()
        settings = client.get_log_settings(headers={"triton-grpc-protocol-log-key": "1"}).settings
        assert {"log_info", "log_warning", "log_error", "log_verbose_level"} <= set(settings)
        # Protocols not named stay open.
        assert client.is_server_ready() and client.get_model_metadata("identity").name == "identity"


def test_port_in_use_is_refused(tuned, tmp_path):
    """grpcio shares ports (SO_REUSEPORT) unless told not to; naiad, like tritonserver, does
    not, so a second server on a taken port fails at start instead of splitting traffic."""
    repo = write_repository(tmp_path, ["identity"])
    second = numpy_server(repo, "--grpc-port", str(tuned.grpc_port))
    with pytest.raises(RuntimeError) as info:
        second.start()
    assert "gRPC: unable to listen on 127.0.0.1:" in str(info.value)
    second.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls(tmp_path):
    key, cert = tmp_path / "server.key", tmp_path / "server.crt"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    repo = write_repository(tmp_path / "models", ["identity"])
    flags = ["--grpc-use-ssl", "true", "--grpc-server-cert", str(cert), "--grpc-server-key", str(key)]
    with numpy_server(repo, *flags) as process:
        with tg.InferenceServerClient(process.grpc_url, ssl=True, root_certificates=str(cert)) as client:
            np.testing.assert_array_equal(client.infer("identity", fp32([1, 2])).as_numpy("OUTPUT0"), [1, 2])
        with grpc.insecure_channel(process.grpc_url) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            with pytest.raises(grpc.RpcError) as info:
                check(b"", timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE


def test_bad_flag_values_are_refused(tmp_path):
    repo = write_repository(tmp_path, ["identity"])
    process = numpy_server(repo, "--grpc-infer-response-compression-level", "max")
    with pytest.raises(RuntimeError) as info:
        process.start()
    assert "invalid choice: 'max'" in str(info.value)
    process = numpy_server(repo, "--grpc-restricted-protocol", "admin:key=value")
    with pytest.raises(RuntimeError) as info:
        process.start()
    assert "unknown restricted protocol 'admin'" in str(info.value)
    process = numpy_server(repo, "--grpc-use-ssl", "true")
    with pytest.raises(RuntimeError) as info:
        process.start()
    assert "--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key" in str(info.value)
