"""One reading of a server endpoint for every command that takes one: `naiad perf -u` (HTTP or
gRPC) and the client commands' `--url` (HTTP or HTTPS)."""

from __future__ import annotations

import pytest

from naiad.cli.kserve_client import base_url
from naiad.loadgen.load_error import LoadError
from naiad.loadgen.target import Target


def test_host_and_port_alone_are_taken_as_tritonclient_takes_them() -> None:
    assert base_url("localhost:8000") == "http://localhost:8000"
    assert Target.parse("localhost:8001", 9) == Target("localhost", 8001)


def test_a_schemes_prefix_is_kept_and_a_missing_port_takes_the_default() -> None:
    assert base_url("https://models.example:8443/") == "https://models.example:8443"
    assert Target.parse("grpc://127.0.0.1", 8001) == Target("127.0.0.1", 8001)


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("ftp://host:1", "the scheme must be http or grpc, not 'ftp'"),
        ("http://:8000", "names no host"),
        ("host:99999", "the port is not a number from 0 to 65535"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_flag_and_the_fault(url: str, what: str) -> None:
    with pytest.raises(LoadError, match="^-u '") as refused:
        Target.parse(url, 8000)
    assert what in str(refused.value)


def test_the_client_commands_name_their_own_flag_and_schemes() -> None:
    with pytest.raises(ValueError, match=r"^--url 'grpc://host:1': the scheme must be http or https, not 'grpc'$"):
        base_url("grpc://host:1")
