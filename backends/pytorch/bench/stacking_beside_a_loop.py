"""Stacking a batch's inputs beside a busy Python thread (what an instance thread does while
the server's event loop runs): numpy's concatenate against torch.cat, into a reused buffer.
numpy gives the interpreter lock away around each request's copy and waits to take it back
each time; torch.cat gives it away once per input.

    .venv/bin/python backends/pytorch/bench/stacking_beside_a_loop.py [--requests 32] [--seconds 2]

Prints, for each, the microseconds a stack takes alone, and the stacks per second and the
other thread's iterations per second when the two run together (two rounds each, alternating).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import numpy as np
from naiad_backend_pytorch.stacking import torch_concatenate

IMAGE = (3, 96, 96)  # the CNN benchmark's image: 110 KB of FP32


def beside_a_python_thread(stack: Callable[[], object], seconds: float) -> tuple[float, float]:
    """(stacks per second, the other thread's iterations per second) run together."""
    stop = time.monotonic() + seconds
    counts = {"stacks": 0, "iterations": 0}

    def stacker() -> None:
        while time.monotonic() < stop:
            stack()
            counts["stacks"] += 1

    def loop() -> None:  # Python work that needs the lock all the time, as a busy event loop
        n = 0
        while time.monotonic() < stop:
            n += 1
        counts["iterations"] = n

    threads = [threading.Thread(target=stacker), threading.Thread(target=loop)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counts["stacks"] / seconds, counts["iterations"] / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((1, *IMAGE)).astype(np.float32) for _ in range(args.requests)]
    out = np.empty((args.requests, *IMAGE), np.float32)
    ways = {
        "numpy": lambda: np.concatenate(parts, axis=0, out=out),
        "torch.cat": lambda: torch_concatenate(parts, out),
    }
    print(f"{args.requests} requests of {parts[0].nbytes // 1024} KB, stacked into a reused buffer")
    for round_ in (1, 2):
        for name, stack in ways.items():
            started = time.perf_counter()
            for _ in range(100):
                stack()
            alone_us = (time.perf_counter() - started) / 100 * 1e6
            stacks, iterations = beside_a_python_thread(stack, args.seconds)
            print(
                f"round {round_}  {name:<9}  alone {alone_us:7.0f} us a stack;  beside a Python thread "
                f"{stacks:7.0f} stacks/s, that thread {iterations / 1e6:5.2f} M iterations/s"
            )


if __name__ == "__main__":
    main()
