"""Every tritonserver launch line starts naiad: each of tritonserver's flags is accepted, acted
on where naiad has the machinery, and otherwise named in one warning at start-up."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.cli import build_parser, main, options_from_args
from naiad.cli.inert_flags import INERT_FLAGS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "http"))
from http_servers import server_process, write_repository  # noqa: E402

FLAGS_FILE = Path(__file__).with_name("tritonserver_flags.txt")

# A value tritonserver would take for each value type its help names...
BY_TYPE = {
    "<boolean>": "true",
    "<integer>": "2",
    "<float>": "7.5",
    "<string>": "x",
    "<<integer>:<integer>>": "0:1048576",
    "<<device_id>:<fraction>>": "0:0.5",
    "<<integer>-<integer>>": "8000-8002",
    "<<string>:<integer>:<integer>>": "R1:4:0",
    "<<string>=<string>>": "summary_latencies=true",
    "<<string>:<string>=<string>>": "health,metadata:key=value",
    "<<string>,<string>=<string>>": "local,size=1024",
}
# ...and where a flag takes only some words, one of those.
BY_FLAG = {
    "--model-repository": "repo",
    "--model-store": "repo",
    "--model-control-mode": "explicit",
    "--log-format": "ISO8601",
    "--grpc-infer-response-compression-level": "low",
    "--trace-level": "OFF",
    "--rate-limit": "execution_count",
    "--trace-config": "rate=10",
    "--backend-config": "onnxruntime,x=1",
    "--host-policy": "gpu_0,numa-node=0",
    "--model-config-name": "h100",
}


def tritonserver_flags() -> list[tuple[str, str]]:
    lines = [line.split(" ", 1) for line in FLAGS_FILE.read_text().splitlines() if not line.startswith("#")]
    return [(parts[0], parts[1] if len(parts) > 1 else "") for parts in lines]


def test_the_flag_list_is_tritonservers_whole_list():
    flags = dict(tritonserver_flags())
    assert len(flags) == 86
    assert {"--http-thread-count", "--pinned-memory-pool-byte-size", "--cache-config", "--trace-file"} <= set(flags)


@pytest.mark.parametrize("flag,value_type", tritonserver_flags())
def test_every_tritonserver_flag_is_accepted(flag, value_type):
    argv = ["serve", "--model-repository", "repo"]
    if value_type:
        argv += [f"{flag}={BY_FLAG.get(flag, BY_TYPE[value_type])}"]
    else:
        argv += [flag]
    # parse_args exits with 2 on an unknown flag or a value it cannot read.
    options_from_args(build_parser().parse_args(argv))


def test_inert_flags_refuse_malformed_values_as_tritonserver_does(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["serve", "--model-repository", "r", "--http-thread-count", "many"])
    assert info.value.code == 2
    assert "--http-thread-count" in capsys.readouterr().err


def test_deprecated_trace_flags_become_trace_config_items():
    args = build_parser().parse_args(
        [
            "serve",
            "--model-repository",
            "r",
            "--trace-file",
            "/tmp/t.json",
            "--trace-level",
            "TIMESTAMPS",
            "--trace-level",
            "TENSORS",
            "--trace-rate",
            "5",
            "--trace-count",
            "-1",
            "--trace-log-frequency",
            "50",
        ]
    )
    assert args.trace_config == [
        "triton,file=/tmp/t.json",
        "level=TIMESTAMPS",
        "level=TENSORS",
        "rate=5",
        "count=-1",
        "triton,log_frequency=50",
    ]
    settings = options_from_args(args).trace_settings
    assert settings is not None
    got = settings.get()
    assert got["trace_file"] == "/tmp/t.json" and got["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    assert got["trace_rate"] == "5" and got["log_frequency"] == "50" and got["trace_count"] == "-1"


def test_model_config_name_must_be_one_plain_name(capsys):
    for bad in ("a b", "../x", "sub/dir", ".."):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["serve", "--model-repository", "r", "--model-config-name", bad])
        assert "--model-config-name" in capsys.readouterr().err


def test_flags_alone_mean_serve(capsys):
    # `naiad` in place of `tritonserver` on a launch line: no subcommand needed. The serve
    # parser reads the flags (the top-level one would not know --allow-http at all).
    with pytest.raises(SystemExit) as info:
        main(["--model-repository", "repo", "--allow-http", "maybe"])
    assert info.value.code == 2
    assert "argument --allow-http: expected true or false, got 'maybe'" in capsys.readouterr().err


CUSTOM = """backend: "numpy" max_batch_size: 3
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]
parameters {key:"op" value {string_value:"echo_parameters"}}"""

UNACTED = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
optimization { eager_batching: true gather_kernel_buffer_threshold: 4 }"""


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """naiad started with a tritonserver launch line: no `serve`, inert and acted-on flags."""
    repo = write_repository(
        tmp_path_factory.mktemp("flags"),
        {
            "echo": CUSTOM.replace("max_batch_size: 3", "max_batch_size: 0"),
            "warm": UNACTED,
        },
    )
    (repo / "echo" / "configs").mkdir()
    (repo / "echo" / "configs" / "h100.pbtxt").write_text(CUSTOM)
    process = server_process(
        repo,
        "--http-thread-count",
        "16",
        "--pinned-memory-pool-byte-size",
        "0",
        "--rate-limit",
        "off",
        "--allow-sagemaker",
        "false",
        "--cache-directory",
        "/opt/caches",
        "--backend-directory",
        "/opt/x",
        "--trace-level",
        "TIMESTAMPS",
        "--trace-rate",
        "7",
        "--trace-file",
        str(repo.parent / "trace.json"),
        "--model-config-name",
        "h100",
        "--http-header-forward-pattern",
        "^x-tenant",
    )
    process.args.remove("serve")
    with process.start():
        yield process


def test_a_tritonserver_launch_line_serves(launched):
    client = httpclient.InferenceServerClient(launched.http_url)
    assert client.is_server_ready()
    settings = client.get_trace_settings()
    assert settings["trace_level"] == ["TIMESTAMPS"] and settings["trace_rate"] == "7"


def test_each_inert_flag_is_named_once_and_harmless_values_are_not(launched):
    log = launched.log()
    for flag in ("--http-thread-count", "--pinned-memory-pool-byte-size", "--cache-directory", "--backend-directory"):
        assert len(re.findall(re.escape(flag) + " has no effect in naiad: ", log)) == 1, log
    for quiet in ("--rate-limit ", "--allow-sagemaker "):
        assert quiet + "has no effect" not in log


def test_every_inert_flag_is_a_tritonserver_flag():
    assert {spec.flag for spec in INERT_FLAGS} <= dict(tritonserver_flags()).keys()


def test_model_config_name_picks_the_custom_config(launched):
    client = httpclient.InferenceServerClient(launched.http_url)
    assert client.get_model_config("echo")["max_batch_size"] == 3
    # A model without configs/h100.pbtxt keeps its config.pbtxt.
    assert client.get_model_config("warm")["max_batch_size"] == 0


def test_http_headers_matching_the_forward_pattern_become_parameters(launched):
    client = httpclient.InferenceServerClient(launched.http_url)
    inp = httpclient.InferInput("INPUT0", [1, 1], "INT32")
    inp.set_data_from_numpy(np.array([[1]], np.int32))
    result = client.infer("echo", [inp], headers={"x-tenant-id": "blue", "x-other": "no"})
    echoed = json.loads(result.as_numpy("OUTPUT0").reshape(-1)[0])
    assert echoed == {"x-tenant-id": "blue"}


def test_unacted_config_fields_are_named_at_load(launched):
    log = launched.log()
    assert "model 'warm': config field 'optimization.eager_batching' has no effect in naiad" in log
    assert "model 'warm': config field 'optimization.gather_kernel_buffer_threshold' has no effect in naiad" in log
    assert "model 'echo': config field" not in log


def test_model_load_retry_count_loads_a_model_that_failed_at_first(tmp_path):
    load_log = tmp_path / "loads.txt"
    flaky = UNACTED.split("optimization")[0] + (
        f'parameters [{{key:"load_log" value {{string_value:"{load_log}"}}}},'
        '{key:"fail_loads" value {string_value:"2"}}]'
    )
    repo = write_repository(tmp_path / "repo", {"flaky": flaky})
    with server_process(repo, "--model-load-retry-count", "2").start() as process:
        assert httpclient.InferenceServerClient(process.http_url).is_model_ready("flaky")
        assert "trying again (1 of 2)" in process.log() and "trying again (2 of 2)" in process.log()
    assert len(load_log.read_text().splitlines()) == 3
    load_log.unlink()
    # Without retries the first failure is final.
    process = server_process(repo, "--exit-on-error", "false")
    with process.start():
        assert not httpclient.InferenceServerClient(process.http_url).is_model_ready("flaky")
        assert "the model failed to load on purpose" in process.log()
