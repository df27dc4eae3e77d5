"""Settings that name files on the server (log_file, trace_file) cannot be changed over
HTTP or gRPC, as in Triton, but the command line still sets them; cleared trace settings
return to the command line's values, a model's cleared setting to the global one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from security_servers import clients, expect_error, numpy_server

LOG_REFUSED = "log file location can not be updated through network protocol"
TRACE_REFUSED = "trace file location can not be updated through network protocol"


@pytest.fixture(scope="module")
def configured(repository: Path, tmp_path_factory: pytest.TempPathFactory):
    files = tmp_path_factory.mktemp("settings")
    process = numpy_server(
        repository,
        "--log-file",
        str(files / "server.log"),
        "--log-verbose",
        "1",
        "--trace-config",
        "level=TIMESTAMPS",
        "--trace-config",
        "rate=1",
        "--trace-config",
        f"triton,file={files / 'trace.json'}",
    )
    # The log goes to --log-file, so readiness is read from the file, not the process's output.
    process.start(expect_ready=False)
    try:
        deadline = time.monotonic() + 60
        while "naiad is ready" not in _text(files / "server.log"):
            assert process.process.poll() is None and time.monotonic() < deadline, process.log()
            time.sleep(0.05)
        yield process, files
    finally:
        process.__exit__()


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_log_and_trace_files_cannot_be_moved_over_the_network(configured, tmp_path):
    server, files = configured
    planted = tmp_path / "planted"
    http, grpc = clients(server)
    for client in (http, grpc):
        expect_error(lambda: client.update_log_settings({"log_file": str(planted)}), LOG_REFUSED)
        expect_error(lambda: client.update_log_settings({"log_file": "", "log_verbose_level": 2}), LOG_REFUSED)
        expect_error(lambda: client.update_trace_settings(settings={"trace_file": str(planted)}), TRACE_REFUSED)
        expect_error(
            lambda: client.update_trace_settings(model_name="identity", settings={"trace_file": str(planted)}),
            TRACE_REFUSED,
        )
    # HTTP's null log_file means "no change" (Triton ignores null log settings); trace_file is
    # refused whatever its value.
    assert http.update_log_settings({"log_file": None})["log_file"] == str(files / "server.log")
    expect_error(lambda: http.update_trace_settings(settings={"trace_file": None}), TRACE_REFUSED)
    assert not planted.exists()
    # The refusals changed nothing; the command line's files are in force.
    assert http.get_log_settings()["log_file"] == str(files / "server.log")
    assert http.get_log_settings()["log_verbose_level"] == 1
    assert http.get_trace_settings()["trace_file"] == str(files / "trace.json")
    assert list(grpc.get_trace_settings().settings["trace_file"].value) == [str(files / "trace.json")]
    assert "naiad is ready" in (files / "server.log").read_text()


def test_cleared_trace_settings_return_to_the_command_line(configured):
    server, _ = configured
    http, grpc = clients(server)
    assert http.update_trace_settings(settings={"trace_level": ["TENSORS"], "trace_rate": "5"})["trace_rate"] == "5"
    cleared = http.update_trace_settings(settings={"trace_level": None, "trace_rate": None})
    assert (cleared["trace_level"], cleared["trace_rate"]) == (["TIMESTAMPS"], "1")

    grpc.update_trace_settings(settings={"trace_level": ["TENSORS"], "trace_count": "9"})
    cleared = grpc.update_trace_settings(settings={"trace_level": None, "trace_count": None}).settings
    assert list(cleared["trace_level"].value) == ["TIMESTAMPS"] and list(cleared["trace_count"].value) == ["-1"]

    # A model's cleared setting follows the global one, also after the global one changes.
    for client in (http, grpc):
        client.update_trace_settings(model_name="identity", settings={"trace_rate": "7"})
        client.update_trace_settings(settings={"trace_rate": "3"})
        client.update_trace_settings(model_name="identity", settings={"trace_rate": None})
        assert http.get_trace_settings(model_name="identity")["trace_rate"] == "3"
        client.update_trace_settings(settings={"trace_rate": None})
        assert http.get_trace_settings(model_name="identity")["trace_rate"] == "1"


def test_null_log_settings_change_nothing_as_in_triton(configured):
    http = clients(configured[0])[0]
    http.update_log_settings({"log_verbose_level": 3})
    assert http.update_log_settings({"log_verbose_level": None, "log_info": None})["log_verbose_level"] == 3
    assert http.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
