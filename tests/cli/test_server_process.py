"""naiad.testing.ServerProcess survives the race every free-port helper has: a port it picked
is taken by another process before the server binds it; it starts again on fresh ports."""

import socket
import sys
from pathlib import Path

import tritonclient.http as httpclient

import naiad.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "http"))
from http_servers import MODELS, server_process, write_repository  # noqa: E402


def test_a_port_taken_before_the_server_binds_it_is_replaced(tmp_path, monkeypatch):
    repo = write_repository(tmp_path, {"identity": MODELS["identity"]})
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    with taken:
        # The first port handed out is one another process holds.
        ports = iter([taken.getsockname()[1]])
        real_free_port = naiad.testing.free_port
        monkeypatch.setattr(naiad.testing, "free_port", lambda: next(ports, None) or real_free_port())
        process = server_process(repo)
        assert process.http_port == taken.getsockname()[1]
        with process.start():
            assert process.http_port != taken.getsockname()[1]
            assert httpclient.InferenceServerClient(process.http_url).is_server_ready()


def test_a_started_server_used_as_a_context_manager_is_not_started_twice(tmp_path):
    # `with process.start():` entered a second, unstopped server (one leaked per such test).
    repo = write_repository(tmp_path, {"identity": MODELS["identity"]})
    process = server_process(repo)
    started = process.start()
    first = process.process
    with started:
        assert process.process is first
    assert first is not None and first.poll() is not None
