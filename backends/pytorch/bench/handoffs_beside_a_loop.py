"""A batch's steps in an instance thread beside a busy Python thread (what an instance thread
does while the model home's event loop runs), done a request at a time and in one call: every
numpy copy or torch call that gives the interpreter lock away must take it back, and each
taking back can wait for the other thread.

- stacking: a batch's images into a reused buffer, numpy's concatenate (it gives the lock away
  around each request's copy) against torch.cat (once);
- output rows: each request's rows of the model's output into a target of its own (on a GPU,
  the client's CUDA shared-memory region; here host tensors), three torch calls per request
  against `copy_rows`'s one for the batch.

    .venv/bin/python backends/pytorch/bench/handoffs_beside_a_loop.py [--requests 32] [--seconds 2]

Prints, for each way, the microseconds a batch takes alone, and the batches per second and the
other thread's iterations per second when the two run together (two rounds each, alternating).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import numpy as np
import torch
from naiad_backend_pytorch.device_outputs import copy_rows
from naiad_backend_pytorch.stacking import torch_concatenate

IMAGE = (3, 96, 96)  # the CNN benchmark's image: 110 KB of FP32
CLASSES = 1000  # the GPU benchmark's output: 4 KB of FP32 a request


def beside_a_python_thread(step: Callable[[], object], seconds: float) -> tuple[float, float]:
    """(steps per second, the other thread's iterations per second) run together."""
    stop = time.monotonic() + seconds
    counts = {"steps": 0, "iterations": 0}

    def stepper() -> None:
        while time.monotonic() < stop:
            step()
            counts["steps"] += 1

    def loop() -> None:  # Python work that needs the lock all the time, as a busy event loop
        n = 0
        while time.monotonic() < stop:
            n += 1
        counts["iterations"] = n

    threads = [threading.Thread(target=stepper), threading.Thread(target=loop)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counts["steps"] / seconds, counts["iterations"] / seconds


def stacking(requests: int) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((1, *IMAGE)).astype(np.float32) for _ in range(requests)]
    out = np.empty((requests, *IMAGE), np.float32)
    return {
        "numpy": lambda: np.concatenate(parts, axis=0, out=out),
        "torch.cat": lambda: torch_concatenate(parts, out),
    }


def output_rows(requests: int) -> dict[str, Callable[[], object]]:
    value = torch.randn(requests, CLASSES)
    sizes = [1] * requests
    targets: list[torch.Tensor | None] = [torch.empty(CLASSES * 4, dtype=torch.uint8) for _ in range(requests)]

    def per_request() -> None:  # as the PyTorch backend wrote them until 2026-11-28
        for part, target in zip(torch.split(value.contiguous(), sizes), targets):
            assert target is not None
            target.copy_(part.reshape(-1).view(torch.uint8), non_blocking=True)

    return {"per request": per_request, "copy_rows": lambda: copy_rows(value, sizes, targets)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    cases = {
        f"stacking {args.requests} images of {np.prod(IMAGE) * 4 // 1024} KB": stacking(args.requests),
        f"output rows of {args.requests} requests, {CLASSES * 4:,} bytes each": output_rows(args.requests),
    }
    for case, ways in cases.items():
        print(case)
        for round_ in (1, 2):
            for name, step in ways.items():
                started = time.perf_counter()
                for _ in range(100):
                    step()
                alone_us = (time.perf_counter() - started) / 100 * 1e6
                steps, iterations = beside_a_python_thread(step, args.seconds)
                print(
                    f"  round {round_}  {name:<11}  alone {alone_us:7.0f} us a batch;  beside a Python thread "
                    f"{steps:7.0f} batches/s, that thread {iterations / 1e6:5.2f} M iterations/s"
                )


if __name__ == "__main__":
    main()
