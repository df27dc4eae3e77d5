"""The metrics endpoint over a real loopback socket: Triton's families with exact counts
that equal the statistics extension, positive durations, counters that survive a reload,
opt-in summaries, CPU gauges, and GPU gauges only with a GPU."""

import asyncio
import threading

import httpx
import numpy as np
import pytest
from metrics_server import MetricsServer
from prometheus_text import value

from naiad import (
    Backend,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    NaiadError,
    Tensor,
    hookimpl,
)

N_OK, M_FAIL = 5, 3


def add_sub_request(batch=2):
    a = np.arange(4 * batch, dtype=np.float32).reshape(batch, 4)
    return InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])


def failing_request():
    return InferenceRequest("failing", [Tensor.from_numpy("INPUT0", np.zeros(4, np.float32))])


async def send(server, ok=N_OK, fail=M_FAIL):
    for _ in range(ok):
        await server.infer(add_sub_request())
    for _ in range(fail):
        with pytest.raises(NaiadError, match="failed on purpose"):
            await server.infer(failing_request())


def gpu_present():
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return False


def test_counters_are_exact_and_equal_the_statistics_extension(repo):
    async def go():
        async with MetricsServer(repo) as ms:
            await send(ms.server)
            # Refused before reaching the model: counted nowhere, as tritonserver does.
            with pytest.raises(NaiadError, match="INPUT1"):
                await ms.server.infer(
                    InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", np.ones((1, 4), np.float32))])
                )
            text, samples, types = await ms.scrape()
            add_sub = {"model": "add_sub", "version": "1"}
            failing = {"model": "failing", "version": "1"}

            assert value(samples, "nv_inference_request_success", **add_sub) == N_OK
            assert value(samples, "nv_inference_request_success", **failing) == 0
            assert value(samples, "nv_inference_request_failure", reason="BACKEND", **failing) == M_FAIL
            for reason in ("REJECTED", "CANCELED", "OTHER"):
                assert value(samples, "nv_inference_request_failure", reason=reason, **failing) == 0
            for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
                assert value(samples, "nv_inference_request_failure", reason=reason, **add_sub) == 0
            assert value(samples, "nv_inference_count", **add_sub) == 2 * N_OK
            # A model that raises: its executions count, its inferences do not (as in tritonserver).
            assert value(samples, "nv_inference_exec_count", **failing) == M_FAIL
            assert value(samples, "nv_inference_count", **failing) == 0
            assert value(samples, "nv_inference_exec_count", **add_sub) == N_OK
            assert value(samples, "nv_inference_pending_request_count", **add_sub) == 0
            assert value(samples, "nv_inference_request_duration_us", **add_sub) > 0
            assert value(samples, "nv_inference_compute_infer_duration_us", **add_sub) > 0
            assert value(samples, "nv_model_load_duration_secs", **add_sub) > 0

            # The statistics extension reads the same counters.
            for stats in ms.server.statistics():
                labels = {"model": stats["name"], "version": stats["version"]}
                inference = stats["inference_stats"]
                assert value(samples, "nv_inference_request_success", **labels) == inference["success"]["count"]
                failures = sum(
                    value(samples, "nv_inference_request_failure", reason=r, **labels)
                    for r in ("REJECTED", "CANCELED", "BACKEND", "OTHER")
                )
                assert failures == inference["fail"]["count"]
                assert value(samples, "nv_inference_count", **labels) == stats["inference_count"]
                assert value(samples, "nv_inference_exec_count", **labels) == stats["execution_count"]
                for family, key in (
                    ("request", "success"),
                    ("queue", "queue"),
                    ("compute_input", "compute_input"),
                    ("compute_infer", "compute_infer"),
                    ("compute_output", "compute_output"),
                ):
                    name = f"nv_inference_{family}_duration_us"
                    assert value(samples, name, **labels) == inference[key]["ns"] // 1000
            add_sub_stats = ms.server.statistics("add_sub")[0]["inference_stats"]
            assert add_sub_stats["success"]["count"] == N_OK and add_sub_stats["queue"]["ns"] > 0
            assert ms.server.statistics("failing")[0]["inference_stats"]["fail"]["count"] == M_FAIL

            for name in (
                "nv_inference_request_success",
                "nv_inference_request_failure",
                "nv_inference_count",
                "nv_inference_exec_count",
                "nv_inference_request_duration_us",
                "nv_inference_queue_duration_us",
                "nv_inference_compute_input_duration_us",
                "nv_inference_compute_infer_duration_us",
                "nv_inference_compute_output_duration_us",
            ):
                assert types[name] == "counter", name
            assert types["nv_inference_pending_request_count"] == "gauge"
            assert not [name for name, _ in samples if name.endswith("_total")]

            # Host gauges; GPU gauges exactly when NVML sees a GPU.
            assert value(samples, "nv_cpu_memory_total_bytes") > value(samples, "nv_cpu_memory_used_bytes") > 0
            assert 0.0 <= value(samples, "nv_cpu_utilization") <= 1.0
            assert ("nv_gpu_memory_total_bytes" in types) == gpu_present()

            async with httpx.AsyncClient() as client:
                missing = await client.get(ms.url.replace("/metrics", "/other"))
                assert missing.status_code == 404 and "/metrics" in missing.text
                assert (await client.post(ms.url)).status_code == 405

    asyncio.run(go())


def test_counters_survive_a_model_reload(repo):
    async def go():
        async with MetricsServer(repo, "--model-control-mode", "explicit", "--load-model", "*") as ms:
            await send(ms.server, ok=3, fail=2)
            _, before, _ = await ms.scrape()
            await ms.server.load_model("add_sub")  # reload while loaded
            await ms.server.load_model("failing")
            _, after_reload, _ = await ms.scrape()
            for name in (
                "nv_inference_request_success",
                "nv_inference_count",
                "nv_inference_exec_count",
                "nv_inference_request_duration_us",
                "nv_inference_compute_infer_duration_us",
            ):
                for model in ("add_sub", "failing"):
                    assert value(after_reload, name, model=model, version="1") == value(
                        before, name, model=model, version="1"
                    ), (name, model)
            assert (
                value(after_reload, "nv_inference_request_failure", model="failing", reason="BACKEND", version="1") == 2
            )

            await send(ms.server, ok=1, fail=1)
            _, after, _ = await ms.scrape()
            assert value(after, "nv_inference_request_success", model="add_sub", version="1") == 4
            assert value(after, "nv_inference_count", model="add_sub", version="1") == 8
            assert value(after, "nv_inference_request_failure", model="failing", reason="BACKEND", version="1") == 3
            assert ms.server.statistics("add_sub")[0]["inference_stats"]["success"]["count"] == 4

            # Unloaded models leave the endpoint; loading again resumes their counters.
            await ms.server.unload_model("add_sub")
            _, unloaded, _ = await ms.scrape()
            assert ("nv_inference_count", frozenset({("model", "add_sub"), ("version", "1")})) not in unloaded
            await ms.server.load_model("add_sub")
            _, reloaded, _ = await ms.scrape()
            assert value(reloaded, "nv_inference_request_success", model="add_sub", version="1") == 4

    asyncio.run(go())


def test_opt_in_summaries_and_counter_latencies_off(repo):
    async def go():
        flags = (
            "--metrics-config",
            "summary_latencies=true",
            "--metrics-config",
            "counter_latencies=false",
            "--metrics-config",
            "summary_quantiles=0.5:0.05,0.99:0.001",
        )
        async with MetricsServer(repo, *flags) as ms:
            await send(ms.server, ok=4, fail=0)
            text, samples, types = await ms.scrape()
            labels = {"model": "add_sub", "version": "1"}
            assert types["nv_inference_request_summary_us"] == "summary"
            assert value(samples, "nv_inference_request_summary_us_count", **labels) == 4
            stats = ms.server.statistics("add_sub")[0]["inference_stats"]
            assert (
                abs(value(samples, "nv_inference_request_summary_us_sum", **labels) - stats["success"]["ns"] / 1000)
                <= 1
            )
            for q in ("0.5", "0.99"):
                assert value(samples, "nv_inference_request_summary_us", quantile=q, **labels) > 0
                assert value(samples, "nv_inference_compute_infer_summary_us", quantile=q, **labels) > 0
            assert value(samples, "nv_inference_queue_summary_us_count", **labels) == 4
            assert "nv_inference_request_duration_us" not in types
            assert value(samples, "nv_inference_request_success", **labels) == 4

    asyncio.run(go())


def test_bad_metrics_flags_are_refused(repo):
    from naiad.cli import build_parser, options_from_args

    for flags, message in (
        (["--metrics-config", "summary_latencies=maybe"], "expected true or false"),
        (["--metrics-config", "bogus=1"], "unknown setting 'bogus'"),
        (["--metrics-config", "summary_quantiles=2:0.1"], "must lie in [0, 1]"),
        (["--metrics-interval-ms", "0"], "must be positive"),
    ):
        args = build_parser().parse_args(["serve", "--model-repository", str(repo), *flags])
        with pytest.raises(NaiadError) as info:
            options_from_args(args)
        assert message in info.value.message


def test_failure_reasons():
    from naiad.observability.statistics import failure_reason

    assert failure_reason(NaiadError.internal("model crashed")) == "BACKEND"
    assert failure_reason(NaiadError.unavailable("queue is full")) == "REJECTED"
    assert failure_reason(NaiadError.cancelled_request()) == "CANCELED"
    assert failure_reason(NaiadError.internal("x"), cancelled=True) == "CANCELED"


class GatedInstance(ModelInstance):
    """Holds each execution until the test opens the gate."""

    gate = threading.Event()

    def execute(self, requests):
        assert self.gate.wait(60)
        return [InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", r.input("INPUT0").data)]) for r in requests]


class GatedModel(Model):
    def create_instance(self, context):
        return GatedInstance(self, context)


class GatedBackend(Backend):
    name = "gated"
    abi_version = (2, 0)

    def create_model(self, context):
        return GatedModel(context)


class GatedPlugin:
    @hookimpl
    def naiad_backends(self):
        return [GatedBackend]


GATED = """backend: "gated" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]}]"""


def test_a_request_cancelled_in_the_queue_counts_as_canceled(repo):
    from metrics_server import make_model

    make_model(repo, "gated", GATED)
    GatedInstance.gate.clear()

    async def go():
        async with MetricsServer(repo, plugins=[GatedPlugin()]) as ms:
            statistics = ms.server.model("gated").statistics

            def gated():
                return InferenceRequest("gated", [Tensor.from_numpy("INPUT0", np.ones(4, np.float32))])

            running = asyncio.create_task(ms.server.infer(gated()))
            queued = asyncio.create_task(ms.server.infer(gated()))
            # One request executes (held at the gate), one waits: pending counts the waiting one.
            while statistics.queue.count < 1 or statistics.pending < 1:
                await asyncio.sleep(0.001)
            _, during, _ = await ms.scrape()
            labels = {"model": "gated", "version": "1"}
            assert value(during, "nv_inference_pending_request_count", **labels) == 1
            queued.cancel()
            GatedInstance.gate.set()
            await running
            while statistics.pending or statistics.fail.count < 1:
                await asyncio.sleep(0.001)
            _, samples, _ = await ms.scrape()
            assert value(samples, "nv_inference_request_success", **labels) == 1
            assert value(samples, "nv_inference_request_failure", reason="CANCELED", **labels) == 1
            assert value(samples, "nv_inference_pending_request_count", **labels) == 0

    asyncio.run(go())
