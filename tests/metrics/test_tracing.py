"""Trace settings with Triton's keys, defaults and validation; sampled request traces
written as JSON (triton mode) or as OpenTelemetry spans; nothing traced by default."""

import asyncio
import json

import numpy as np
import pytest
from numpy_backend import NumpyPlugin

from naiad import InferenceRequest, NaiadError, Server, ServerOptions, Tensor
from naiad.cli import build_parser, options_from_args
from naiad.observability.otlp_export import OtlpExportSettings, otlp_tracer_provider
from naiad.observability.trace_config import trace_settings_from_config
from naiad.observability.trace_settings import TraceSetting, TraceSettings

TRITON_DEFAULTS = {
    "trace_level": ["OFF"],
    "trace_rate": "1000",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_file": "",
    "trace_mode": "triton",
}
ORDER = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_END", "REQUEST_END"]


def request():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    return InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])


def serve_with(repo, *trace_flags):
    args = build_parser().parse_args(["serve", "--model-repository", str(repo), *trace_flags])
    options = options_from_args(args)
    options.backend_plugins = [NumpyPlugin()]
    return Server(options)


def test_defaults_and_validation():
    settings = TraceSettings()
    assert settings.get() == TRITON_DEFAULTS and settings.get("any_model") == TRITON_DEFAULTS
    cases = [
        ({"trace_level": ["BAD"]}, "unknown level(s) ['BAD']"),
        ({"trace_level": ["OFF", "TIMESTAMPS"]}, "OFF cannot be combined"),
        ({"trace_level": [3]}, "must be a list"),
        ({"trace_rate": "x"}, "trace_rate must be an integer"),
        ({"trace_rate": "0"}, "trace_rate must be at least 1"),
        ({"trace_count": "-2"}, "trace_count must be at least -1"),
        ({"log_frequency": "-1"}, "log_frequency must be at least 0"),
        ({"trace_file": "/tmp/t.json"}, "trace file location can not be updated through network protocol"),
        ({"trace_mode": "opentelemetry"}, "cannot be changed while serving"),
        ({"trace_colour": "red"}, "unknown trace setting 'trace_colour'"),
        ({"trace_level": ["TIMESTAMPS"]}, "--trace-config triton,file=PATH to enable tracing"),
    ]
    for changes, message in cases:
        with pytest.raises(NaiadError) as info:
            settings.update(changes)
        assert message in info.value.message, (changes, info.value.message)
        assert settings.get() == TRITON_DEFAULTS


def test_model_overrides_fall_back_to_global(tmp_path):
    settings = TraceSettings(TraceSetting(file=str(tmp_path / "t.json")))
    assert settings.update({"trace_rate": "5"}, model="add_sub")["trace_rate"] == "5"
    assert settings.get()["trace_rate"] == "1000"
    settings.update({"trace_level": ["TENSORS", "TIMESTAMPS"]})
    assert settings.get("add_sub")["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    assert settings.update({"trace_rate": None}, model="add_sub")["trace_rate"] == "1000"
    assert settings.update({"trace_level": None}) == {**TRITON_DEFAULTS, "trace_file": str(tmp_path / "t.json")}
    # gRPC's shape: every value a list of strings, an empty list clears.
    assert settings.update({"trace_rate": ["7"]}, model="m")["trace_rate"] == "7"
    assert settings.update({"trace_rate": []}, model="m")["trace_rate"] == "1000"
    with pytest.raises(NaiadError, match="takes one value"):
        settings.update({"trace_rate": ["1", "2"]})


def test_trace_config_flags():
    settings = trace_settings_from_config(
        [
            "level=TIMESTAMPS",
            "level=TENSORS",
            "rate=10",
            "count=3",
            "log_frequency=2",
            "triton,file=/tmp/t.json",
            "opentelemetry,url=http://127.0.0.1:4318/v1/traces",
        ]
    )
    assert settings.get() == {
        "trace_level": ["TIMESTAMPS", "TENSORS"],
        "trace_rate": "10",
        "trace_count": "3",
        "log_frequency": "2",
        "trace_file": "/tmp/t.json",
        "trace_mode": "triton",
    }
    # Typed inside: numbers as numbers.
    assert settings.current() == TraceSetting(
        level=("TIMESTAMPS", "TENSORS"), rate=10, count=3, log_frequency=2, file="/tmp/t.json"
    )
    assert settings.export == OtlpExportSettings(url="http://127.0.0.1:4318/v1/traces")
    for items, message in (
        (["rate"], "expected [MODE,]KEY=VALUE"),
        (["speed=1"], "unknown setting 'speed'"),
        (["jaeger,url=x"], "unknown mode 'jaeger'"),
        (["level=LOUD"], "unknown level"),
    ):
        with pytest.raises(NaiadError) as info:
            trace_settings_from_config(items)
        assert message in info.value.message


def test_off_by_default_traces_nothing(repo):
    async def go():
        async with Server(ServerOptions([str(repo)], backend_plugins=[NumpyPlugin()])) as server:
            assert server.tracing.active is False
            r = request()
            await server.infer(r)
            assert r.trace is None

    asyncio.run(go())


def test_triton_mode_writes_sampled_traces(repo, tmp_path):
    path = tmp_path / "trace.json"

    async def go():
        server = serve_with(
            repo, "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=2", "--trace-config", f"file={path}"
        )
        async with server:
            for _ in range(5):
                await server.infer(request())
            for _ in range(2):
                with pytest.raises(NaiadError):
                    await server.infer(
                        InferenceRequest("failing", [Tensor.from_numpy("INPUT0", np.zeros(4, np.float32))])
                    )

    asyncio.run(go())
    traces = json.loads(path.read_text())
    # One request in two is sampled, counting across models without their own settings:
    # add_sub's 1st, 3rd and 5th, then the failing model's 2nd (the 7th overall).
    assert [(t["model_name"], t["model_version"]) for t in traces] == [("add_sub", "1")] * 3 + [("failing", "1")]
    for trace in traces:
        names = [s["name"] for s in trace["timestamps"]]
        assert names == ORDER, names
        stamps = [s["ns"] for s in trace["timestamps"]]
        assert stamps == sorted(stamps) and stamps[-1] > stamps[0]
    assert len({t["id"] for t in traces}) == 4


def test_count_log_frequency_and_tensors(repo, tmp_path):
    path = tmp_path / "trace.json"

    async def go():
        server = serve_with(
            repo,
            "--trace-config",
            "level=TENSORS",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "count=3",
            "--trace-config",
            "log_frequency=2",
            "--trace-config",
            f"file={path}",
        )
        async with server:
            for _ in range(5):
                await server.infer(request())
            # Live update re-arms the count.
            server.tracing.update({"trace_count": "1"})
            await server.infer(request())
            await server.infer(request())

    asyncio.run(go())
    first = json.loads((tmp_path / "trace.json.0").read_text())
    second = json.loads((tmp_path / "trace.json.1").read_text())
    assert len(first) == 2 and len(second) == 2  # 3 by count, then 1 after the update
    tensors = first[0]["tensors"]
    inputs = [t for t in tensors if t["activity"] == "TENSOR_QUEUE_INPUT"]
    outputs = [t for t in tensors if t["activity"] == "TENSOR_BACKEND_OUTPUT"]
    assert [t["name"] for t in inputs] == ["INPUT0", "INPUT1"] and inputs[0]["shape"] == [2, 4]
    assert inputs[0]["data"] == list(range(8)) and [t["name"] for t in outputs] == ["OUTPUT0", "OUTPUT1"]
    assert outputs[0]["data"] == [2 * v for v in range(8)]


def test_opentelemetry_spans(repo):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def go():
        server = serve_with(
            repo,
            "--trace-config",
            "mode=opentelemetry",
            "--trace-config",
            "level=TIMESTAMPS",
            "--trace-config",
            "rate=1",
        )
        server.tracing.tracer_provider = provider
        async with server:
            r = request()
            r.id = "req-7"
            await server.infer(r)

    asyncio.run(go())
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"InferRequest", "queue", "compute"}
    root = spans["InferRequest"]
    assert root.attributes["triton.model_name"] == "add_sub" and root.attributes["triton.request_id"] == "req-7"
    for child in ("queue", "compute"):
        assert spans[child].parent.span_id == root.context.span_id
        assert spans[child].context.trace_id == root.context.trace_id
        assert root.start_time <= spans[child].start_time <= spans[child].end_time <= root.end_time
    assert spans["queue"].end_time <= spans["compute"].start_time
    assert [e.name for e in root.events] == ORDER


def test_otlp_export_to_a_collector_on_loopback(repo):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from otlp_collector import OtlpCollector

    with OtlpCollector() as collector:
        provider = otlp_tracer_provider(OtlpExportSettings(url=collector.url, resource=(("deployment", "test"),)))
        try:

            async def go():
                server = serve_with(
                    repo,
                    "--trace-config",
                    "mode=opentelemetry",
                    "--trace-config",
                    "level=TIMESTAMPS",
                    "--trace-config",
                    "rate=1",
                )
                server.tracing.tracer_provider = provider
                async with server:
                    await server.infer(request())

            asyncio.run(go())
            assert provider.force_flush(10_000)
        finally:
            provider.shutdown()
    assert collector.exports and collector.exports[0].path == "/v1/traces"
    exported = collector.exports[0].request
    resource = {a.key: a.value.string_value for a in exported.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "naiad" and resource["deployment"] == "test"
    assert sorted(collector.exports[0].span_names) == ["InferRequest", "compute", "queue"]


def otlp_flags(url, *settings):
    """`--trace-config` items for opentelemetry mode sending every request's spans to `url`."""
    items = ["mode=opentelemetry", "level=TIMESTAMPS", "rate=1", f"opentelemetry,url={url}", *settings]
    return [flag for item in items for flag in ("--trace-config", item)]


def test_bsp_max_export_batch_size_bounds_each_export(repo):
    """tritonserver's opentelemetry,bsp_max_export_batch_size: no export request carries more
    spans than it; the server's stop sends what is left."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from otlp_collector import OtlpCollector

    with OtlpCollector() as collector:

        async def go():
            flags = otlp_flags(
                collector.url, "opentelemetry,bsp_max_export_batch_size=2", "opentelemetry,bsp_schedule_delay=50"
            )
            async with serve_with(repo, *flags) as server:
                for _ in range(4):
                    await server.infer(request())

        asyncio.run(go())
        # Four requests, three spans each (InferRequest, queue, compute).
        assert collector.spans() == 12
        sizes = [len(e.span_names) for e in collector.exports]
    assert max(sizes) <= 2 and len(sizes) >= 6, sizes


def test_bsp_schedule_delay_sets_when_spans_leave(repo):
    """opentelemetry,bsp_schedule_delay (milliseconds): with 100 ms a request's spans reach the
    collector well before the SDK's default of 5 s; with a minute they wait for the server's
    stop. The margins are seconds wide."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from otlp_collector import OtlpCollector

    waited = {}
    with OtlpCollector() as soon, OtlpCollector() as late:

        async def go():
            for name, collector, delay in (("soon", soon, 100), ("late", late, 60_000)):
                flags = otlp_flags(collector.url, f"opentelemetry,bsp_schedule_delay={delay}")
                async with serve_with(repo, *flags) as server:
                    await server.infer(request())
                    waited[name] = await asyncio.to_thread(collector.wait_for_spans, 3, 2.5)
                assert collector.spans() == 3  # the stop flushed what the queue held

        asyncio.run(go())
    assert waited["soon"] is not None and waited["soon"] < 2.5
    assert waited["late"] is None


@pytest.mark.parametrize(
    "setting, message",
    [
        ("bsp_max_export_batch_size=0", "opentelemetry,bsp_max_export_batch_size must be a positive integer, got 0"),
        ("bsp_schedule_delay=soon", "opentelemetry,bsp_schedule_delay must be a positive integer, got 'soon'"),
        ("bsp_max_queue_size=-5", "opentelemetry,bsp_max_queue_size must be a positive integer, got -5"),
        (
            "bsp_max_export_batch_size=4096",
            "opentelemetry,bsp_max_export_batch_size (4096) must not exceed opentelemetry,bsp_max_queue_size (2048)",
        ),
        ("resource=team", "opentelemetry,resource: expected KEY=VALUE, got 'team'"),
    ],
)
def test_bad_otlp_settings_are_refused_naming_the_setting(setting, message):
    items = ["opentelemetry,url=http://127.0.0.1:4318/v1/traces", f"opentelemetry,{setting}"]
    with pytest.raises(NaiadError) as info:
        trace_settings_from_config(items)
    assert info.value.message == f"--trace-config: {message}"


def test_batch_settings_without_a_collector_are_refused():
    with pytest.raises(NaiadError) as info:
        trace_settings_from_config(["mode=opentelemetry", "opentelemetry,bsp_schedule_delay=100"])
    assert "opentelemetry,bsp_schedule_delay configure the exporter that opentelemetry,url=URL starts" in (
        info.value.message
    )


def test_naiad_serve_refuses_a_bad_batch_setting():
    """On the command line: the usage error names the flag and the setting, exit status 2."""
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "naiad.cli",
            "serve",
            "--model-repository",
            "unused",
            "--trace-config",
            "opentelemetry,url=http://127.0.0.1:4318/v1/traces",
            "--trace-config",
            "opentelemetry,bsp_max_queue_size=many",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "error: --trace-config: opentelemetry,bsp_max_queue_size must be a positive integer, got 'many'" in (
        result.stderr
    )
