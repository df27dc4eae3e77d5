"""A batch's inputs stacked by torch: `torch.cat` copies a whole input in one call that gives
the interpreter lock away once. numpy's concatenate gives it away around each request's copy
and takes it back after; in a server whose event loop is busy, each taking back can wait a
switch interval (5 ms), so a batch of 32 requests stacked by numpy could wait 32 times where
torch waits once. Beside a thread running Python, stacking 32 images of 110 KB into a reused
buffer went from 13-20 batches a second with numpy to 108-164 with torch
(`backends/pytorch/bench/handoffs_beside_a_loop.py`). Alone, torch took 267 us a batch with one
intra-op thread, as numpy did, and 430-515 with two on a 2-CPU machine; the CNN served as
many images a second either way there, where the event loop is seldom busy enough to make
the waits. The model home of a GPU machine, fed by many front doors, is where they add up.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

__all__ = ["torch_concatenate"]

# What torch concatenates on the CPU; BF16 travels as uint16 words, copied as int16 ones.
_COPIED = {np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")}
_WORDS = {np.dtype("uint16"): np.dtype("int16")}

# A request's tensor may view read-only memory (the wire's bytes); torch.cat only reads it.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)


def torch_concatenate(arrays: list[np.ndarray], out: np.ndarray | None) -> np.ndarray:
    """`naiad.backend.helpers.Concatenate` by torch.cat; numpy's for what torch does not copy
    (strings, unsigned words wider than 16 bits)."""
    dtype = arrays[0].dtype
    copied = _WORDS.get(dtype, dtype)
    if copied not in _COPIED:
        return np.concatenate(arrays, axis=0, out=out)
    destination = out
    if copied is not dtype:
        arrays = [a.view(copied) for a in arrays]
        out = None if out is None else out.view(copied)
    try:
        parts = [torch.from_numpy(a) for a in arrays]  # strided views included
    except ValueError:  # negative strides, which torch does not view
        parts = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    if out is None:
        return torch.cat(parts).numpy().view(dtype)
    torch.cat(parts, out=torch.from_numpy(out))
    return destination
