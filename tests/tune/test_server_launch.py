"""The server tune starts on a repository: started again on fresh ports when one it picked was
taken before the server could bind it."""

from __future__ import annotations

import itertools
import socket

from tune_models import write_doubler

from naiad.cli.kserve_client import KServeClient
from naiad.local_ports import free_port
from naiad.tune import server_launch
from naiad.tune.server_launch import ServerLauncher


def test_a_port_taken_before_the_server_binds_it_is_traded_for_a_fresh_one(tmp_path, monkeypatch):
    write_doubler(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: as a client's source port is
        taken_port = taken.getsockname()[1]
        # The first port handed out (the HTTP port of the first try) is that one.
        ports = itertools.chain([taken_port], iter(free_port, None))
        monkeypatch.setattr(server_launch, "free_port", lambda: next(ports))
        launcher = ServerLauncher(tmp_path, [], lambda url: KServeClient(f"http://{url}", 30.0))
        try:
            server = launcher.ensure(1)
            assert server.http_port != taken_port
            assert KServeClient(f"http://{server.http_url}", 30.0).server_ready()
        finally:
            launcher.stop()
