"""Log settings: Triton's logging-extension keys and defaults, validation that names the
bad key and changes nothing, and their effect on what is logged and where."""

import logging
import re

import httpx
import pytest

from naiad import NaiadError, Server, ServerOptions
from naiad.cli import build_parser, options_from_args
from naiad.observability.log_settings import LogSettings
from naiad.testing import ServerProcess

TRITON_DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}


@pytest.fixture
def installed(tmp_path):
    settings = LogSettings(log_file=str(tmp_path / "first.log"))
    previous = logging.getLogger().level
    settings.install()
    yield settings
    settings.uninstall()
    logging.getLogger().setLevel(previous)


def test_defaults_match_triton_and_the_server_owns_them():
    assert LogSettings().get() == TRITON_DEFAULTS
    assert Server(ServerOptions()).log_settings.get() == TRITON_DEFAULTS


def test_bad_values_are_refused_and_change_nothing(tmp_path):
    settings = LogSettings()
    cases = [
        ({"log_verbose_level": "x"}, "log_verbose_level must be an integer >= 0"),
        ({"log_verbose_level": -1}, "log_verbose_level must be an integer >= 0"),
        ({"log_verbose_level": True}, "log_verbose_level must be an integer >= 0"),
        ({"log_info": "yes"}, "log_info must be a boolean"),
        ({"log_error": 1}, "log_error must be a boolean"),
        ({"log_format": "bad"}, "log_format must be 'default' or 'ISO8601'"),
        ({"log_file": str(tmp_path / "x.log")}, "log file location can not be updated through network protocol"),
        ({"log_colour": True}, "unknown log setting 'log_colour'"),
        ({"log_info": False, "log_format": "bad"}, "log_format"),
    ]
    for changes, message in cases:
        with pytest.raises(NaiadError) as info:
            settings.update(changes)
        assert message in info.value.message
        assert settings.get() == TRITON_DEFAULTS, changes
    with pytest.raises(NaiadError, match="JSON object"):
        settings.update(["log_info"])


def test_update_returns_the_new_settings():
    settings = LogSettings()
    result = settings.update({"log_verbose_level": 2, "log_info": False, "log_format": "ISO8601", "log_warning": None})
    assert result == {**TRITON_DEFAULTS, "log_verbose_level": 2, "log_info": False, "log_format": "ISO8601"}
    assert settings.get() == result


def test_cli_flags_fill_the_settings(tmp_path):
    args = build_parser().parse_args(
        [
            "serve",
            "--model-repository",
            str(tmp_path),
            "--log-verbose",
            "1",
            "--log-info",
            "false",
            "--log-warning",
            "false",
            "--log-error",
            "true",
            "--log-format",
            "ISO8601",
            "--log-file",
            str(tmp_path / "x.log"),
        ]
    )
    assert options_from_args(args).log_settings.get() == {
        "log_file": str(tmp_path / "x.log"),
        "log_info": False,
        "log_warning": False,
        "log_error": True,
        "log_verbose_level": 1,
        "log_format": "ISO8601",
    }


def test_settings_govern_what_is_logged_and_where(installed, tmp_path):
    log = logging.getLogger("naiad.test")
    log.info("info one")
    log.debug("debug hidden")
    first = (tmp_path / "first.log").read_text()
    assert re.search(r"^I\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ naiad\.test\] info one$", first, re.M), first
    assert "debug hidden" not in first

    installed.update({"log_info": False, "log_verbose_level": 1, "log_format": "ISO8601"})
    log.info("info hidden")
    log.warning("warning shown")
    log.debug("debug shown")
    text = (tmp_path / "first.log").read_text()
    assert "info hidden" not in text
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ W \d+ naiad\.test\] warning shown$", text, re.M), text
    assert re.search(r"Z I \d+ naiad\.test\] debug shown$", text, re.M), text

    installed.update({"log_warning": False, "log_error": False})
    log.warning("warning hidden")
    log.error("error hidden")
    assert "hidden" not in (tmp_path / "first.log").read_text()
    assert installed.get()["log_file"] == str(tmp_path / "first.log")


def test_the_log_file_is_checked_at_start_up(tmp_path):
    with pytest.raises(NaiadError, match="is a directory"):
        LogSettings(log_file=str(tmp_path))
    with pytest.raises(NaiadError, match="log_file must be a string"):
        LogSettings(log_file=3)  # type: ignore[arg-type]


def test_served_process_logs_in_iso8601_and_serves_metrics(tmp_path):
    with ServerProcess(tmp_path, "--allow-http", "false", "--allow-grpc", "false", "--log-format", "ISO8601") as proc:
        response = httpx.get(proc.metrics_url)
        assert response.status_code == 200
        assert "# TYPE nv_cpu_memory_total_bytes gauge" in response.text
        assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ naiad\] naiad is ready", proc.log(), re.M), proc.log()
