"""`naiad perf` against the real Triton server (2.51, `../shared/bench/triton.sh`) serving
`../shared/bench/models`: the same columns as against naiad, over HTTP and gRPC, with
Triton's own statistics in the server columns. Skipped, with the reason, where Triton
cannot be started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from perf_servers import naiad_perf, table_rows
from test_perf_command import SUMMARY_COLUMNS, step_blocks

from naiad.testing import free_port

BENCH = Path(__file__).resolve().parents[2].parent / "shared" / "bench"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def triton():
    script = BENCH / "triton.sh"
    if not script.exists():
        pytest.skip(f"no Triton here: {script.name} is not in ../shared/bench beside this checkout")
    http, grpc, metrics = free_port(), free_port(), free_port()
    started = subprocess.run(
        ["bash", str(script), str(BENCH / "models"), str(http), str(grpc), str(metrics)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if started.returncode != 0:
        pytest.skip(f"Triton did not start (../shared/bench/setup_anchors.sh installs it): {started.stderr.strip()}")
    pid = int(started.stdout.split()[-1])
    try:
        yield f"127.0.0.1:{http}", f"127.0.0.1:{grpc}"
    finally:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_same_columns_against_triton(triton, protocol):
    url = triton[0] if protocol == "http" else triton[1]
    result = naiad_perf(
        "-m", "add_sub", "-i", protocol, "-u", url, "--concurrency-range", "1:2", "-p", "500", "-r", "4", "-s", "100"
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert list(rows[0]) == SUMMARY_COLUMNS
    assert [row["Concurrency"] for row in rows] == ["1", "2"]
    for row, block in zip(rows, step_blocks(result.stdout).values()):
        assert row["Errors"] == "0"
        assert float(row["Infer/s"]) > 0
        requests = int(block["Request count"])
        # Triton's statistics extension counted the same requests, and timed their execution.
        assert abs(int(block["Successful request count"]) - requests) <= max(10, requests // 10)
        assert int(row["Compute infer us"]) > 0
