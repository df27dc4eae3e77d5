"""naiad_wire.listen: the one place server sockets are bound."""

from __future__ import annotations

import errno
import socket

import pytest

from naiad_wire.listen import listen


def test_listens_on_the_port_the_kernel_picks():
    with listen("127.0.0.1", 0) as sock:
        port = sock.getsockname()[1]
        assert port > 0 and not sock.getblocking()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_a_port_in_use_is_an_error_naming_the_address():
    with listen("127.0.0.1", 0) as first:
        port = first.getsockname()[1]
        with pytest.raises(OSError, match=f"gRPC cannot listen on 127.0.0.1:{port}: ") as info:
            listen("127.0.0.1", port, name="gRPC")
        assert info.value.errno == errno.EADDRINUSE


def test_reuse_port_lets_two_sockets_share_a_port():
    with listen("127.0.0.1", 0, reuse_port=True) as first:
        port = first.getsockname()[1]
        with listen("127.0.0.1", port, reuse_port=True) as second:
            assert second.getsockname()[1] == port
            assert second.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
