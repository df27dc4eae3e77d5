#!/usr/bin/env python3
"""What a batch costs the server's event loop, apart from what each of its requests costs: the
core's share of a request to a Python model, without HTTP or gRPC.

    .venv/bin/python bench/batch_cost.py [--sizes 1 8 32] [--requests 20000] [--busy-poll-us 0]

An in-process `naiad.Server` serves ../shared/bench/models (add_sub: a Python model in its own
process, dynamic batching); rounds of K requests are sent at once through `Server.infer`, so
each round is one batch of K. The CPU time of this process (the model's process is another)
per request and per round is printed for each K, then the line through the rounds' costs:
microseconds per request and per batch. At 8 connections a batch's fixed cost is shared by
8 requests, at 64 by about 32: that is where the two rows' costs per request part.
Polling is off by default (`--busy-poll-us`, as `naiad serve`'s): a polling loop's CPU time
counts its waiting too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np
import uvloop

from naiad import Server, ServerOptions
from naiad.inference import InferenceRequest
from naiad.tensor import Tensor
from naiad_wire import busy_poll

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadkit  # noqa: E402

WARMUP_ROUNDS = 50


def add_sub_request() -> InferenceRequest:
    ones = np.ones((1, 16), np.float32)
    return InferenceRequest(
        model_name="add_sub",
        inputs=[Tensor("INPUT0", "FP32", (1, 16), ones), Tensor("INPUT1", "FP32", (1, 16), ones)],
    )


async def round_of(server: Server, size: int) -> None:
    await asyncio.gather(*[server.infer(add_sub_request()) for _ in range(size)])


async def measure(sizes: list[int], requests: int) -> dict[int, float]:
    """CPU microseconds per round, by round size."""
    per_round: dict[int, float] = {}
    async with Server(ServerOptions([str(loadkit.bench_dir() / "models")])) as server:
        for size in sizes:
            for _ in range(WARMUP_ROUNDS):
                await round_of(server, size)
            rounds = max(1, requests // size)
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(rounds):
                await round_of(server, size)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            per_round[size] = cpu / rounds * 1e6
            print(
                f"batches of {size:>3}: {per_round[size] / size:7.1f} us of CPU a request, "
                f"{per_round[size]:8.1f} a batch; {wall / (rounds * size) * 1e6:7.1f} us of wall time a request"
            )
    return per_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=20000, help="requests per size")
    parser.add_argument("--busy-poll-us", type=int, default=0)
    args = parser.parse_args()
    busy_poll.configure(args.busy_poll_us)
    per_round = uvloop.run(measure(args.sizes, args.requests))
    if len(per_round) > 1:
        sizes = np.array(list(per_round), float)
        slope, intercept = np.polyfit(sizes, np.array(list(per_round.values())), 1)
        print(f"fitted: {slope:.1f} us a request + {intercept:.1f} us a batch")


if __name__ == "__main__":
    main()
