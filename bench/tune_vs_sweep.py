#!/usr/bin/env python3
"""`naiad tune`'s quick search against the exhaustive sweep of the same space, on the CNN of
bench/cnn_model.py (ONNX, dynamic batching) with a p99 budget: does quick find a configuration
whose throughput is at least 0.95 of the sweep's best, in at most 25% of the sweep's time?

    .venv/bin/python bench/tune_vs_sweep.py [--interval-ms 500] [--budget-ms 50] [--json out.json]

Three runs of `naiad tune --model-repository` (each starts its own `naiad serve`):

1. quick, measuring everything itself;
2. brute over the same space, with a checkpoint;
3. quick again, reading the sweep's checkpoint: the two searches' choices compared on one set of
   figures, which the machine's noise cannot separate (its time is what its points cost the
   sweep).

Then both winners (quick's of run 1 and the sweep's) are measured once more, alternately, twice
each, with `naiad tune` on one-point spaces, so the verdict does not rest on the one lucky
window that made a point the sweep's best (the sweep's best of many noisy points errs high).

It prints the space, the times, both results and the verdicts, with the load average at the
start and at the end (a shared machine's figures move with its neighbours).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cnn_model import build_network, export_onnx, model_config

ROOT = Path(__file__).resolve().parents[1]
SPACE = {
    "--instances": "1,2,3,4",
    "--max-batch-sizes": "1,4,16,64",
    "--queue-delays-us": "0,200,1000",
    "--intra-op-threads": "1,2",
}
DIMENSION = {
    "instances": "--instances",
    "max_batch_size": "--max-batch-sizes",
    "max_queue_delay_us": "--queue-delays-us",
    "intra_op_threads": "--intra-op-threads",
}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def tune(repo: Path, out: Path, flags: list[str], space: dict[str, str]) -> tuple[dict[str, Any], float]:
    command = [sys.executable, "-m", "naiad.cli", "tune", "cnn", "--model-repository", str(repo), "-o", str(out)]
    for flag, values in space.items():
        command += [flag, values]
    start = time.monotonic()
    result = subprocess.run(command + flags, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        raise SystemExit(f"naiad tune failed ({result.returncode}):\n{result.stderr[-3000:]}")
    print(result.stdout, flush=True)
    return json.loads((out / "tune.json").read_text()), seconds


def one_point(candidate: dict[str, int]) -> dict[str, str]:
    return {DIMENSION[name]: str(value) for name, value in candidate.items()}


def best_throughput(record: dict[str, Any]) -> float:
    best = record["best"]["throughput"]
    return 0.0 if best is None else float(best["step"]["throughput"])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--interval-ms", type=int, default=500, help="measurement window (default 500)")
    parser.add_argument("--max-trials", type=int, default=4, help="windows per step at most (default 4)")
    parser.add_argument("--budget-ms", type=float, default=50.0, help="p99 budget (default 50)")
    parser.add_argument("--max-concurrency", type=int, default=16, help="(default 16)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    flags = [
        "--measurement-interval",
        str(args.interval_ms),
        "--max-trials",
        str(args.max_trials),
        "--stability-percentage",
        "10",
        "--latency-budget-ms",
        f"{args.budget_ms:g}",
        "--max-concurrency",
        str(args.max_concurrency),
    ]
    start_load = load()
    print(f"load average at the start: {start_load}; {len(os.sched_getaffinity(0))} usable CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="naiad-tune-vs-sweep-") as tmp:
        work = Path(tmp)
        repo = work / "models"
        (repo / "cnn" / "1").mkdir(parents=True)
        export_onnx(build_network([16, 48, 96, 192]), repo / "cnn" / "1" / "model.onnx")
        (repo / "cnn" / "config.pbtxt").write_text(model_config("cnn", 'platform: "onnxruntime_onnx"'))

        print("1. quick, measuring itself", flush=True)
        quick, quick_s = tune(repo, work / "quick", flags + ["--search", "quick"], SPACE)
        print("2. brute, every point", flush=True)
        checkpoint = ["--checkpoint", str(work / "sweep.jsonl")]
        brute, brute_s = tune(repo, work / "brute", flags + ["--search", "brute", *checkpoint], SPACE)
        print("3. quick on the sweep's measurements", flush=True)
        replay, _ = tune(repo, work / "replay", flags + ["--search", "quick", *checkpoint], SPACE)

        print("4. both winners measured again, alternately", flush=True)
        winners = {"quick": quick["best"]["throughput"], "brute": brute["best"]["throughput"]}
        again: dict[str, list[float]] = {"quick": [], "brute": []}
        for round_ in range(2):
            for name, best in winners.items():
                if best is None:
                    continue
                point = one_point(best["candidate"])
                record, _ = tune(repo, work / f"again-{name}-{round_}", flags + ["--search", "brute"], point)
                again[name].append(best_throughput(record))
    end_load = load()

    ratio_found = best_throughput(quick) / best_throughput(brute) if best_throughput(brute) else 0.0
    ratio_time = quick_s / brute_s
    ratio_replay = best_throughput(replay) / best_throughput(brute) if best_throughput(brute) else 0.0
    replay_time = replay["measured_seconds"] / brute["measured_seconds"]
    mean = {name: sum(v) / len(v) if v else 0.0 for name, v in again.items()}
    ratio_again = mean["quick"] / mean["brute"] if mean["brute"] else 0.0
    lines = [
        f"space: {', '.join(f'{k} {v}' for k, v in SPACE.items())} ({len(brute['candidates'])} points)",
        f"p99 budget {args.budget_ms:g} ms; windows of {args.interval_ms} ms, at most {args.max_trials}",
        f"load average: start {start_load}, end {end_load}",
        f"quick: {len(quick['candidates'])} candidates, {quick_s:.0f} s, best {best_throughput(quick):.0f}/s "
        f"at {quick['best']['throughput'] and quick['best']['throughput']['candidate']}",
        f"brute: {len(brute['candidates'])} candidates, {brute_s:.0f} s, best {best_throughput(brute):.0f}/s "
        f"at {brute['best']['throughput'] and brute['best']['throughput']['candidate']}",
        f"separate runs: quick/brute throughput {ratio_found:.2f} (goal >= 0.95), time {ratio_time:.2f} (goal <= 0.25)",
        f"quick on the sweep's figures: {len(replay['candidates'])} candidates, throughput {ratio_replay:.2f}, "
        f"time {replay_time:.2f}",
        f"winners measured again (2 each, alternately): quick {again['quick']}, brute {again['brute']}: "
        f"ratio {ratio_again:.2f}",
    ]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "space": SPACE,
                    "budget_ms": args.budget_ms,
                    "interval_ms": args.interval_ms,
                    "load_average": {"start": start_load, "end": end_load},
                    "quick": {"seconds": quick_s, "record": quick},
                    "brute": {"seconds": brute_s, "record": brute},
                    "replay": replay,
                    "again": again,
                    "summary": lines,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
