"""`naiad tune` against the real Triton server (shared/bench/triton.sh, Python backend, started
in explicit model control mode through its TRITON_ARGS): the same config overrides, the same
failed load recorded with Triton's own message, memory read through --server-pid. Skipped, with
the reason, where triton.sh cannot start Triton."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_tune_command import FAST, naiad_tune
from tune_models import write_doubler

from naiad.testing import free_port

ROOT = Path(__file__).resolve().parents[2]


def bench_dir() -> Path:
    return Path(os.environ.get("BENCH_DIR", ROOT.parent / "shared" / "bench"))


@pytest.fixture(scope="module")
def triton(tmp_path_factory):
    script = bench_dir() / "triton.sh"
    if not script.exists():
        pytest.skip(f"no {script}: Triton is not set up beside this checkout")
    repo = write_doubler(tmp_path_factory.mktemp("triton_models"))
    http, grpc, metrics = free_port(), free_port(), free_port()
    env = {**os.environ, "TRITON_ARGS": "--model-control-mode=explicit"}
    started = subprocess.run(
        ["bash", str(script), str(repo), str(http), str(grpc), str(metrics)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if started.returncode != 0:
        pytest.skip(f"triton.sh could not start Triton: {started.stderr.strip()[-300:]}")
    pid = int(started.stdout.split()[-1])
    yield f"127.0.0.1:{http}", pid
    # triton.sh starts Triton in its own session: the group is Triton and its Python stubs.
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.killpg(pid, signal.SIGKILL)


@pytest.mark.slow
def test_tune_against_triton_in_explicit_mode(triton, tmp_path):
    url, pid = triton
    out = tmp_path / "out"
    result = naiad_tune(
        "doubler",
        "-u",
        url,
        "--server-pid",
        str(pid),
        "--search",
        "brute",
        "--instances",
        "1,2",
        "--max-batch-sizes",
        "8,16",
        "--queue-delays-us",
        "0",
        "--max-concurrency",
        "2",
        "-o",
        out,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "tune.json").read_text())
    loaded = {(c["candidate"]["instances"], c["candidate"]["max_batch_size"]): c for c in record["candidates"]}
    assert sorted(loaded) == [(1, 8), (1, 16), (2, 8), (2, 16)]
    for instances in (1, 2):
        assert loaded[(instances, 16)]["loaded"] is False
        # Triton's own words around the model's.
        assert "load failed for model 'doubler'" in loaded[(instances, 16)]["message"]
        assert "this model takes batches of at most 8, not 16" in loaded[(instances, 16)]["message"]
        assert loaded[(instances, 8)]["loaded"] is True
        assert loaded[(instances, 8)]["steps"][0]["throughput"] > 0
        assert loaded[(instances, 8)]["memory_mb"] > 10  # Triton's tree, through --server-pid
    assert record["best"]["throughput"]["candidate"]["max_batch_size"] == 8
    text = (out / "throughput" / "config.pbtxt").read_text()
    assert "max_batch_size: 8" in text and 'backend: "python"' in text
