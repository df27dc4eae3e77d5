"""`--cache-config redis,...` against a real Redis server the tests start on loopback."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pytest
from model_servers import executions, infer, model_config, server, statistics, write_model

from naiad.testing import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="redis-server is not installed (Debian: apt-get install redis-server)",
)
redis = pytest.importorskip("redis", reason="the redis client library is not installed: pip install 'naiad[redis]'")

PASSWORD = "redis123!"


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory):
    port = free_port()
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            PASSWORD,
            "--dir",
            str(tmp_path_factory.mktemp("redis")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    yield port
    process.terminate()
    process.wait(10)


def redis_flags(port: int, password: str = PASSWORD) -> list[str]:
    return [
        "--cache-config",
        "redis,host=127.0.0.1",
        "--cache-config",
        f"redis,port={port}",
        "--cache-config",
        f"redis,password={password}",
    ]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_answers_are_stored_in_redis_and_outlive_the_server(tmp_path, redis_port, protocol):
    log = tmp_path / "log"
    write_model(tmp_path / "repo", "identity", model_config("identity", log))
    x = np.random.default_rng().random((2, 3), dtype=np.float32)
    keys = redis.Redis(host="127.0.0.1", port=redis_port, password=PASSWORD)
    before = len(keys.keys("naiad:response:*"))
    with server(tmp_path / "repo", *redis_flags(redis_port)) as process:
        for _ in range(2):
            np.testing.assert_array_equal(infer(process, protocol, "identity", x)["OUTPUT0"], x)
        assert len(executions(log)) == 1
        stats = statistics(process, "identity")["inference_stats"]
        assert stats["cache_hit"]["count"] == 1 and stats["cache_miss"]["count"] == 1
    assert len(keys.keys("naiad:response:*")) == before + 1
    # A new server process finds the answer in Redis.
    with server(tmp_path / "repo", *redis_flags(redis_port)) as process:
        np.testing.assert_array_equal(infer(process, protocol, "identity", x)["OUTPUT0"], x)
        assert len(executions(log)) == 1


def test_credentials_may_come_from_tritons_environment_variable(tmp_path, redis_port):
    log = tmp_path / "log"
    write_model(tmp_path / "repo", "identity", model_config("identity", log))
    flags = redis_flags(redis_port)[:4]
    with server(tmp_path / "repo", *flags, env={"TRITONCACHE_REDIS_PASSWORD": PASSWORD}) as process:
        x = np.full((1, 1), 9, np.float32)
        infer(process, "http", "identity", x)
        infer(process, "http", "identity", x)
        assert len(executions(log)) == 1


@pytest.mark.parametrize(
    "flags, words",
    [
        (lambda port: redis_flags(port, "wrong"), "AuthenticationError: invalid username-password pair"),
        (lambda port: redis_flags(free_port()), "failed to connect to Redis (127.0.0.1:"),
        (lambda port: ["--cache-config", f"redis,port={port}"], "Must at a minimum specify 'host' and 'port'"),
    ],
)
def test_a_redis_cache_that_cannot_be_used_stops_the_start(tmp_path, redis_port, flags, words):
    (tmp_path / "repo").mkdir()
    process = server(tmp_path / "repo", *flags(redis_port)).start(expect_ready=False)
    try:
        assert process.wait(60) != 0
    finally:
        process.stop()
    assert words in process.log()
