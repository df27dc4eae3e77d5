"""Running a model builder in a fresh interpreter.

TensorFlow loaded into the test process makes a later `torch.export` in the same process
crash while importing triton (a native-library clash), so SavedModels are built apart."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def run_apart(function: Callable[..., Any], *args: Any, timeout: float = 300) -> None:
    process = multiprocessing.get_context("spawn").Process(target=function, args=args)
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        raise RuntimeError(f"{function.__name__} did not finish in {timeout}s")
    if process.exitcode != 0:
        raise RuntimeError(f"{function.__name__} failed with exit code {process.exitcode}")
