"""`naiad serve` finds its frontends through the `naiad.frontends` entry points: a package
installed beside naiad adds its flags to `naiad serve` and is started with its own typed
options; one that cannot be loaded is named in a warning and the others serve."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from naiad.frontends import Frontend
from naiad.testing import ServerProcess, free_port

ECHO_FRONTEND = """
import asyncio
from dataclasses import dataclass

from naiad.frontends import Frontend, option


@dataclass(frozen=True, slots=True, kw_only=True)
class EchoOptions:
    enabled: bool = option(False, "--allow-echo", "serve the echo API")
    port: int = option(9300, "--echo-port", "echo port")
    address: str | None = option(None, "--echo-address", "echo address (default: the HTTP address)")
    greeting: str = option("hello", "--echo-greeting", "what the echo API says first")


async def run(server, options, started):
    async def answer(reader, writer):
        line = f"{options.greeting} {type(options).__name__} {options.address} {server.options.server_id}\\n"
        writer.write(line.encode())
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(answer, options.address, options.port)
    started.set()
    async with listener:
        await listener.serve_forever()


FRONTEND = Frontend(name="echo", title="echo API", options=EchoOptions, run=run, order=50, address_from="http")
"""


def install(site: Path, entry_points: str, modules: dict[str, str]) -> dict[str, str]:
    """A distribution in `site` (its dist-info and modules), as pip would leave it; the
    environment that puts it on a server's path."""
    info = site / "echo_frontend-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-frontend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[naiad.frontends]\n{entry_points}\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_an_installed_frontend_brings_its_flags_and_gets_its_typed_options(tmp_path):
    env = install(tmp_path / "site", "echo = echo_frontend:FRONTEND", {"echo_frontend": ECHO_FRONTEND})
    help_text = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    ).stdout
    assert "echo API:" in help_text and "--echo-greeting ECHO_GREETING" in help_text
    assert "what the echo API says first (default hello)" in help_text

    (tmp_path / "models").mkdir()
    port = free_port()
    flags = ("--allow-echo", "true", "--echo-port", str(port), "--echo-greeting", "hi", "--id", "mine")
    with ServerProcess(tmp_path / "models", *flags, env=env) as server:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            reply = conn.makefile().readline()
        # The address it was not given is the HTTP frontend's (ServerProcess: 127.0.0.1).
        assert reply == "hi EchoOptions 127.0.0.1 mine\n"
        assert "naiad is ready: http, grpc, metrics, echo" in server.log()
        assert httpclient.InferenceServerClient(server.http_url).is_server_ready()


def test_a_frontend_that_cannot_be_loaded_is_named_and_the_others_serve(tmp_path):
    env = install(
        tmp_path / "site",
        "broken = not_installed_anywhere:FRONTEND\nwrong = echo_frontend:EchoOptions",
        {"echo_frontend": ECHO_FRONTEND},
    )
    (tmp_path / "models").mkdir()
    with ServerProcess(tmp_path / "models", env=env) as server:
        assert httpclient.InferenceServerClient(server.http_url).is_server_live()
        log = server.log()
    assert "frontend 'broken' (not_installed_anywhere:FRONTEND) cannot be loaded: No module named" in log
    assert "frontend 'wrong' (echo_frontend:EchoOptions) is a type, not a naiad.frontends.Frontend; left out" in log


def test_a_frontends_bad_flag_value_is_refused_naming_the_flag(tmp_path):
    env = install(tmp_path / "site", "echo = echo_frontend:FRONTEND", {"echo_frontend": ECHO_FRONTEND})
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--model-repository", "x", "--echo-port", "many"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert result.returncode == 2
    assert "argument --echo-port: invalid int value: 'many'" in result.stderr


def test_a_frontend_whose_options_cannot_turn_it_on_is_refused():
    @dataclasses.dataclass(frozen=True)
    class NoSwitch:
        port: int = 1

    async def run(server, options, started):
        started.set()

    with pytest.raises(TypeError, match="frontend 'x': NoSwitch has no 'enabled' field"):
        Frontend(name="x", title="x", options=NoSwitch, run=run)
