"""bench/gpu_bench.py's plumbing on any machine: `--device cpu --quick` builds the network,
measures the in-process ceiling, serves it with naiad, checks the served answer against the
module and runs every row without a failed request, in a few seconds. On a GPU machine
scripts/gpu-check.sh runs the real thing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_benchmark_runs_on_a_cpu(tmp_path):
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "gpu_bench.py"),
            "--device",
            "cpu",
            "--quick",
            "--duration",
            "0.5",
            "--concurrency",
            "1",
            "2",
            "--naiad-flags",
            "--workers 1",
            "--json",
            str(out),
            "--profile",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "answers checked over HTTP and gRPC" in result.stdout
    figures = json.loads(out.read_text())
    assert [(row["protocol"], row["connections"]) for row in figures["rows"]] == [
        ("http", 1),
        ("http", 2),
        ("grpc", 1),
        ("grpc", 2),
    ]
    assert all(row["errors"] == 0 and row["images_per_s"] > 0 for row in figures["rows"])
    # The server's own phases and the CPU each part used are measured for every row.
    assert all(row["server_us"]["compute_infer"] > 0 for row in figures["rows"])
    for row in figures["rows"]:
        assert set(row["cpus"]) == {"home", "workers", "other", "clients"}
        assert row["cpus"]["home"] + row["cpus"]["workers"] + row["cpus"]["other"] > 0
        assert row["cpus"]["clients"] > 0
        # A profile only where py-spy is installed and may attach; the field is always there.
        assert isinstance(row["profile"], list) and isinstance(row["gil_profile"], list)
    assert sorted(int(batch) for batch in figures["ceiling"]["per_batch"]) == [1, 8, 16, 32, 64]
    assert figures["ceiling"]["images_per_s"] == max(figures["ceiling"]["per_batch"].values())
    assert "goal: grpc at 2 connections >= 0.8 of the ceiling" in result.stdout


def test_the_gpu_benchmark_serves_the_network_from_a_model_py(tmp_path):
    out = tmp_path / "figures.json"
    command = [sys.executable, str(ROOT / "bench" / "gpu_bench.py"), "--device", "cpu", "--quick", "--backend"]
    command += ["python", "--protocols", "http", "--concurrency", "1", "--duration", "1", "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "config: a model.py (the Python backend)" in result.stdout
    assert "answers checked over HTTP and gRPC" in result.stdout
    figures = json.loads(out.read_text())
    assert figures["backend"] == "python" and not figures["cuda_graphs"]
    [row] = figures["rows"]
    assert (row["protocol"], row["errors"]) == ("http", 0) and row["images_per_s"] > 0


def test_the_gpu_benchmark_says_no_gpu_and_stops(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the benchmark would run")
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_bench.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "gpu_bench: no GPU: torch sees no CUDA device" in result.stdout


def test_a_profile_is_summarised_as_the_busiest_frames(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from py_spy_profile import top_frames

    stacks = tmp_path / "stacks.txt"
    stacks.write_text(
        "main (a.py:1);loop (a.py:9);stack (b.py:3) 30\n"
        "main (a.py:1);loop (a.py:9);forward (c.py:7) 60\n"
        "worker (d.py:2);stack (b.py:3) 10\n"
        "not a sample line\n"
    )
    assert top_frames(stacks, 2) == [("forward (c.py:7)", 0.6), ("stack (b.py:3)", 0.4)]
