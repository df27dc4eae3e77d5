"""The CLI: complete help, documented flags, and a real `naiad serve` process."""

import re
import subprocess
import sys
from pathlib import Path

from naiad.cli import build_parser, options_from_args

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def subcommand_parsers():
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def test_every_flag_of_every_subcommand_is_documented_and_has_help():
    documented = DOCS.read_text()
    parsers = subcommand_parsers()
    assert {"serve", "models", "infer"} <= set(parsers)
    for name, parser in parsers.items():
        flags = [s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"]
        assert len(flags) > (20 if name == "serve" else 1)
        missing = [f for f in flags if not re.search(re.escape(f) + r"\b", documented)]
        assert missing == [], f"naiad {name}: flags missing from docs/cli.md: {missing}"
        undocumented_help = [a.option_strings or a.dest for a in parser._actions if not a.help]
        assert undocumented_help == [], f"naiad {name}"


def test_documented_flags_exist():
    flags = {s for parser in subcommand_parsers().values() for a in parser._actions for s in a.option_strings}
    documented = set(re.findall(r"`(--[a-z0-9-]+)", DOCS.read_text()))
    assert documented - flags == set()


def test_help_runs():
    for args in (["--help"], ["serve", "--help"]):
        result = subprocess.run([sys.executable, "-m", "naiad.cli", *args], capture_output=True, text=True)
        assert result.returncode == 0
        assert "--model-repository" in result.stdout or args == ["--help"]
    assert (
        "serve" in subprocess.run([sys.executable, "-m", "naiad.cli", "--help"], capture_output=True, text=True).stdout
    )


def test_tritonserver_flags_map_to_options():
    args = build_parser().parse_args(
        [
            "serve",
            "--model-repository",
            "a",
            "--model-store",
            "b",
            "--model-control-mode",
            "explicit",
            "--load-model",
            "x",
            "--load-model",
            "*",
            "--strict-readiness",
            "false",
            "--exit-on-error",
            "0",
            "--backend-config",
            "onnxruntime,intra_op_thread_count=2",
            "--backend-config",
            "default-max-batch-size=4",
            "--strict-model-config",
            "true",
            "--repository-poll-secs",
            "2",
        ]
    )
    options = options_from_args(args)
    assert options.model_repositories == ["a", "b"]
    assert options.model_control_mode == "explicit" and options.load_models == ["x", "*"]
    assert options.strict_readiness is False and options.exit_on_error is False
    assert options.backend_config == {
        "onnxruntime": {"intra_op_thread_count": "2"},
        "": {"default-max-batch-size": "4"},
    }
    assert options.auto_complete_config is False and options.repository_poll_secs == 2


def test_bad_flag_values_are_refused():
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--model-repository", "x", "--strict-readiness", "maybe"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "expected true or false, got 'maybe'" in result.stderr


def test_a_negative_busy_poll_window_is_refused_naming_the_flag(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--model-repository", str(tmp_path), "--busy-poll-us", "-5"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "--busy-poll-us must be 0 or more, not -5" in result.stderr


def test_serve_prints_status_table_and_exits_on_error(tmp_path):
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text(
        'backend: "numpy" version_policy: { latest: { num_versions: 0 } }'
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "naiad.cli",
            "serve",
            "--model-repository",
            str(tmp_path),
            "--allow-http",
            "false",
            "--allow-grpc",
            "false",
            "--allow-metrics",
            "false",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert re.search(
        r"\| broken +\| - +\| UNAVAILABLE: model 'broken': version_policy.latest.num_versions: must be at least 1",
        result.stderr,
    ), result.stderr


def test_start_up_reads_like_tritonservers(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "http"))
    from http_servers import MODELS, server_process, write_repository

    repo = write_repository(tmp_path, {"identity": MODELS["identity"]})
    process = server_process(repo, "--allow-metrics", "true", "--backend-config", "numpy,flavour=plain")
    with process.start():
        log = process.log()
    assert "loading: identity:1" in log and "successfully loaded 'identity' version(s) [1]" in log
    assert re.search(
        r"\| Backend \| Module +\| Config +\|\n.*\n\| numpy +\| numpy_backend +\| "
        r'\{"cmdline": \{"flavour": "plain"\}\} \|',
        log,
    ), log
    assert re.search(r"\| identity \| 1 +\| READY +\|", log)
    assert re.search(r"\| server_id +\| triton +\|", log)
    assert re.search(r"\| server_extensions +\| classification sequence model_repository .*binary_tensor_data", log)
    assert re.search(rf"\| model_repository_path\[0\] +\| {re.escape(str(repo))} +\|", log)
    assert re.search(r"\| model_control_mode +\| MODE_NONE +\|", log)
    assert f"Started HTTPService at 127.0.0.1:{process.http_port}" in log
    assert f"Started Metrics Service at 127.0.0.1:{process.metrics_port}" in log
    assert "uvicorn" not in log  # every line under naiad's own logger names


def test_a_missing_repository_is_one_clear_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "--model-repository", str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"error: creating server: model repository '{tmp_path / 'absent'}' is not a directory" in result.stderr
