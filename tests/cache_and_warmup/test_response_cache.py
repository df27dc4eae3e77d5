"""The response cache through tritonclient: hits skip the model, errors are never stored,
the key tells apart what changes the answer, memory stays within `size`, concurrent
identical requests all get the right answer, and Triton's statistics and metrics."""

from __future__ import annotations

import concurrent.futures
import re
import urllib.request

import numpy as np
import pytest
from model_servers import executions, infer, model_config, server, statistics, write_model
from prometheus_text import parse, value
from tritonclient.utils import InferenceServerException

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A server with a 1 MiB local cache and models that log their executions."""
    root = tmp_path_factory.mktemp("cache")
    repo, logs = root / "repo", root / "logs"
    logs.mkdir()
    write_model(repo, "identity", model_config("identity", logs / "identity"))
    write_model(repo, "add_sub", model_config("add_sub", logs / "add_sub", max_batch_size=8, dims="[4]", inputs=2))
    write_model(repo, "uncached", model_config("identity", logs / "uncached", cache=False))
    write_model(repo, "failing", model_config("fail", logs / "failing"))
    write_model(
        repo,
        "slow",
        model_config(
            "sleep",
            logs / "slow",
            extra=(
                'parameters [{key:"sleep_ms" value {string_value:"400"}}]\ninstance_group [{kind: KIND_CPU count: 4}]\n'
            ),
        ),
    )
    write_model(
        repo,
        "echo",
        model_config("echo_parameters", logs / "echo", dims="[1]").replace(
            'output [{name:"OUTPUT0" data_type: TYPE_FP32 dims: [1]}]',
            'output [{name:"OUTPUT0" data_type: TYPE_STRING dims: [1]}]',
        ),
    )
    with server(repo, "--cache-config", "local,size=1048576") as process:
        yield process, logs


def scrape(process) -> tuple[dict, dict]:
    with urllib.request.urlopen(process.metrics_url) as response:
        return parse(response.read().decode())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_repeated_request_is_answered_from_the_cache_without_running_the_model(cached, protocol):
    process, logs = cached
    a = np.array([[1, 2, 3, 4]], np.float32) + (10 if protocol == "grpc" else 0)
    b = np.full((1, 4), 0.5, np.float32)
    before = len(executions(logs / "add_sub"))
    first = infer(process, protocol, "add_sub", a, b)
    again = infer(process, protocol, "add_sub", a, b)
    np.testing.assert_array_equal(first["OUTPUT0"], a + b)
    np.testing.assert_array_equal(first["OUTPUT1"], a - b)
    for name in first:
        np.testing.assert_array_equal(again[name], first[name])
    assert len(executions(logs / "add_sub")) == before + 1
    # Other inputs are another entry.
    np.testing.assert_array_equal(infer(process, protocol, "add_sub", b, a)["OUTPUT0"], a + b)
    assert len(executions(logs / "add_sub")) == before + 2


def test_a_model_that_does_not_enable_the_cache_runs_every_time(cached):
    process, logs = cached
    x = np.ones((2, 2), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(infer(process, "http", "uncached", x)["OUTPUT0"], x)
    assert len(executions(logs / "uncached")) == 3
    stats = statistics(process, "uncached")["inference_stats"]
    assert stats["cache_hit"]["count"] == 0 and stats["cache_miss"]["count"] == 0


def test_same_bytes_in_another_shape_or_another_output_or_parameter_is_another_entry(cached):
    process, logs = cached
    before = len(executions(logs / "identity"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(infer(process, "http", "identity", x)["OUTPUT0"], x)
    # Same bytes, other shape: Triton's hash (names and bytes only) would answer [2, 3].
    np.testing.assert_array_equal(infer(process, "http", "identity", x.reshape(3, 2))["OUTPUT0"], x.reshape(3, 2))
    assert len(executions(logs / "identity")) == before + 2
    # The request's own parameters reach the model: each value is its own entry.
    one = np.ones((1,), np.float32)
    first = infer(process, "http", "echo", one, parameters={"tag": "a"})["OUTPUT0"]
    second = infer(process, "http", "echo", one, parameters={"tag": "b"})["OUTPUT0"]
    assert b'"a"' in first.reshape(-1)[0] and b'"b"' in second.reshape(-1)[0]
    assert infer(process, "http", "echo", one, parameters={"tag": "a"})["OUTPUT0"] == first
    assert len(executions(logs / "echo")) == 2


def test_asking_for_another_output_is_not_answered_with_the_cached_one(cached):
    process, logs = cached
    a, b = np.full((1, 4), 7, np.float32), np.full((1, 4), 2, np.float32)
    assert set(infer(process, "http", "add_sub", a, b, outputs=["OUTPUT0"])) == {"OUTPUT0"}
    only_second = infer(process, "grpc", "add_sub", a, b, outputs=["OUTPUT1"])
    np.testing.assert_array_equal(only_second["OUTPUT1"], a - b)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_error_is_never_cached(cached, protocol):
    process, logs = cached
    before = len(executions(logs / "failing"))
    x = np.full((1, 1), 3, np.float32)
    for _ in range(2):
        with pytest.raises(InferenceServerException, match="failed on purpose"):
            infer(process, protocol, "failing", x)
    assert len(executions(logs / "failing")) == before + 2


def test_concurrent_identical_requests_all_get_the_whole_answer(cached):
    process, logs = cached
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: infer(process, PROTOCOLS[i % 2], "slow", x), range(8)))
    for answer in answers:
        np.testing.assert_array_equal(answer["OUTPUT0"], x)
    ran = len(executions(logs / "slow"))
    assert 1 <= ran <= 8
    np.testing.assert_array_equal(infer(process, "http", "slow", x)["OUTPUT0"], x)
    assert len(executions(logs / "slow")) == ran  # stored once, answered from the cache


def test_statistics_and_metrics_count_hits_and_misses_as_triton_does(cached):
    process, logs = cached
    x = np.full((1, 3), 42, np.float32)
    before = statistics(process, "identity")
    for _ in range(3):
        infer(process, "http", "identity", x)
    after = statistics(process, "identity")
    stats, old = after["inference_stats"], before["inference_stats"]
    assert stats["cache_miss"]["count"] - old["cache_miss"]["count"] == 1
    assert stats["cache_hit"]["count"] - old["cache_hit"]["count"] == 2
    assert stats["cache_hit"]["ns"] > old["cache_hit"]["ns"]
    # A hit is a success with its queue time, but no inference, execution or compute.
    assert stats["success"]["count"] - old["success"]["count"] == 3
    assert stats["queue"]["count"] - old["queue"]["count"] == 3
    assert stats["compute_infer"]["count"] - old["compute_infer"]["count"] == 1
    assert after["inference_count"] - before["inference_count"] == 1
    assert after["execution_count"] - before["execution_count"] == 1

    samples, types = scrape(process)
    labels = {"model": "identity", "version": "1"}
    assert value(samples, "nv_cache_num_hits_per_model", **labels) == stats["cache_hit"]["count"]
    assert value(samples, "nv_cache_num_misses_per_model", **labels) == stats["cache_miss"]["count"]
    assert value(samples, "nv_cache_hit_duration_per_model", **labels) == stats["cache_hit"]["ns"] // 1000
    assert value(samples, "nv_cache_miss_duration_per_model", **labels) == stats["cache_miss"]["ns"] // 1000
    for family in (
        "nv_cache_num_hits_per_model",
        "nv_cache_num_misses_per_model",
        "nv_cache_hit_duration_per_model",
        "nv_cache_miss_duration_per_model",
    ):
        assert types[family] == "counter"
    # Only models using the cache have per-model cache series, as in Triton.
    assert ("nv_cache_num_hits_per_model", frozenset({"model": "uncached", "version": "1"}.items())) not in samples
    server_wide = (
        "nv_cache_util",
        "nv_cache_num_entries",
        "nv_cache_num_hits",
        "nv_cache_num_misses",
        "nv_cache_num_lookups",
        "nv_cache_num_evictions",
        "nv_cache_lookup_duration",
        "nv_cache_insertion_duration",
    )
    for family in server_wide:
        assert types[family] == "gauge"
    assert value(samples, "nv_cache_num_lookups") == value(samples, "nv_cache_num_hits") + value(
        samples, "nv_cache_num_misses"
    )
    assert value(samples, "nv_cache_num_entries") >= 1
    assert 0 < value(samples, "nv_cache_util") <= 1


def test_the_cache_keeps_within_its_size_evicting_the_least_recently_used(tmp_path):
    log = tmp_path / "log"
    write_model(tmp_path / "repo", "identity", model_config("identity", log))
    entry = lambda n: np.full((1, 64), n, np.float32)  # noqa: E731 - 256 bytes of data per entry
    with server(tmp_path / "repo", "--response-cache-byte-size", "700") as process:
        for n in (1, 2):  # two entries fit, a third does not
            infer(process, "http", "identity", entry(n))
        infer(process, "http", "identity", entry(1))  # 1 is now the most recently used
        infer(process, "http", "identity", entry(3))  # evicts 2
        assert len(executions(log)) == 3
        infer(process, "http", "identity", entry(1))
        infer(process, "http", "identity", entry(3))
        assert len(executions(log)) == 3
        infer(process, "http", "identity", entry(2))
        assert len(executions(log)) == 4
        # An answer larger than the whole cache is not stored.
        big = np.ones((1, 1024), np.float32)
        infer(process, "grpc", "identity", big)
        infer(process, "grpc", "identity", big)
        assert len(executions(log)) == 6
        samples, _ = scrape(process)
        assert value(samples, "nv_cache_num_entries") == 2
        assert value(samples, "nv_cache_num_evictions") == 2
        assert value(samples, "nv_cache_util") <= 1
        assert (
            "--response-cache-byte-size is deprecated; the equivalent is --cache-config local,size=700" in process.log()
        )
        assert re.search(r"\| cache_enabled +\| 1 +\|", process.log())


def test_without_a_server_cache_a_model_that_enables_it_runs_every_time(tmp_path):
    log = tmp_path / "log"
    write_model(tmp_path / "repo", "identity", model_config("identity", log))
    with server(tmp_path / "repo") as process:
        x = np.ones((1, 2), np.float32)
        infer(process, "http", "identity", x)
        infer(process, "grpc", "identity", x)
        assert len(executions(log)) == 2
        samples, types = scrape(process)
        assert not [name for name in types if name.startswith("nv_cache")]
        assert re.search(r"\| cache_enabled +\| 0 +\|", process.log())


def test_an_ensemble_hit_skips_its_steps(tmp_path):
    log = tmp_path / "step"
    repo = tmp_path / "repo"
    write_model(repo, "step", model_config("scale", log, cache=False))
    write_model(
        repo,
        "pipeline",
        """platform: "ensemble" max_batch_size: 0
input [{name:"IN" data_type: TYPE_FP32 dims:[-1, -1]}]
output [{name:"OUT" data_type: TYPE_FP32 dims:[-1, -1]}]
ensemble_scheduling { step [{model_name:"step" model_version:-1
  input_map {key:"INPUT0" value:"IN"} output_map {key:"OUTPUT0" value:"OUT"}}] }
response_cache { enable: true }""",
    )
    import tritonclient.http as httpclient

    with server(repo, "--cache-config", "local,size=65536") as process:
        connection = httpclient.InferenceServerClient(process.http_url)
        x = np.full((1, 3), 2, np.float32)
        for _ in range(2):
            tensor = httpclient.InferInput("IN", [1, 3], "FP32")
            tensor.set_data_from_numpy(x)
            np.testing.assert_array_equal(connection.infer("pipeline", [tensor]).as_numpy("OUT"), x * 2)
        assert len(executions(log)) == 1
        stats = statistics(process, "pipeline")["inference_stats"]
        assert stats["cache_hit"]["count"] == 1 and stats["cache_miss"]["count"] == 1


DECOUPLED = """backend: "numpy" max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{name:"IN" data_type: TYPE_INT32 dims:[-1]}]
output [{name:"OUT" data_type: TYPE_INT32 dims:[1]},{name:"IDX" data_type: TYPE_UINT32 dims:[1]}]
parameters {key:"op" value {string_value:"repeat"}}
response_cache { enable: true }"""

SEQUENCE = """backend: "numpy" max_batch_size: 4
sequence_batching { }
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
response_cache { enable: true }"""


@pytest.mark.parametrize(
    "config, words",
    [
        (DECOUPLED, "Response Cache does not currently support model {} with 'decoupled' transaction policy"),
        (SEQUENCE, "Response Cache does not currently support model {} with sequence batching scheduler"),
    ],
)
def test_a_cache_on_a_decoupled_or_sequence_model_fails_its_load_in_tritons_words(tmp_path, config, words):
    write_model(tmp_path / "repo", "model", config)
    import tritonclient.http as httpclient

    with server(tmp_path / "repo", "--cache-config", "local,size=4096", "--model-control-mode", "explicit") as p:
        with pytest.raises(InferenceServerException) as failure:
            httpclient.InferenceServerClient(p.http_url).load_model("model")
        assert words.format("model") in str(failure.value)


@pytest.mark.parametrize(
    "flags, words",
    [
        (
            ["--cache-config", "local,size=8192", "--cache-config", "redis,host=localhost"],
            "found multiple cache configurations, but only a single cache is currently supported",
        ),
        (
            ["--response-cache-byte-size", "12345", "--cache-config", "local,size=67890"],
            "Incompatible flags --response-cache-byte-size and --cache-config both provided",
        ),
        (["--cache-config", "size=10"], "No cache specified. --cache-config option format is"),
        (["--cache-config", "local,size=lots"], "'size' must be a number of bytes"),
        (["--cache-config", "memcached,host=x"], "unknown cache implementation 'memcached'"),
    ],
)
def test_cache_flags_that_cannot_work_stop_the_start_with_a_clear_message(tmp_path, flags, words):
    (tmp_path / "repo").mkdir()
    process = server(tmp_path / "repo", *flags).start(expect_ready=False)
    try:
        assert process.wait(60) != 0
    finally:
        process.stop()
    assert words in process.log()


def test_local_cache_never_holds_more_than_its_size():
    import asyncio

    from naiad.cache.local_cache import LocalCache

    async def fill() -> LocalCache:
        cache = LocalCache(1000)
        rng = np.random.default_rng(0)
        for n in range(200):
            await cache.insert(n.to_bytes(4, "little"), bytes(int(rng.integers(1, 400))))
            assert cache.used <= 1000
        await cache.insert(b"too large", bytes(1001))
        assert await cache.lookup(b"too large") is None
        return cache

    cache = asyncio.run(fill())
    assert cache.used == sum(len(v) for v in cache._entries.values()) <= 1000
    assert len(cache) > 1


def test_summary_latencies_add_tritons_cache_summaries(tmp_path):
    write_model(tmp_path / "repo", "identity", model_config("identity", tmp_path / "log"))
    flags = ("--cache-config", "local,size=4096", "--metrics-config", "summary_latencies=true")
    with server(tmp_path / "repo", *flags) as process:
        x = np.ones((1, 2), np.float32)
        for _ in range(3):
            infer(process, "http", "identity", x)
        samples, types = scrape(process)
        labels = {"model": "identity", "version": "1"}
        assert types["nv_cache_hit_summary_per_model"] == types["nv_cache_miss_summary_per_model"] == "summary"
        assert value(samples, "nv_cache_hit_summary_per_model_count", **labels) == 2
        assert value(samples, "nv_cache_miss_summary_per_model_count", **labels) == 1
        assert ("nv_cache_hit_summary_per_model", frozenset({**labels, "quantile": "0.5"}.items())) in samples
