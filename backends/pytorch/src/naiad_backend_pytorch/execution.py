"""How an instance runs forward, from the config's `parameters` (Triton's PyTorch backend
names, upper- or lower-case): the grad mode, TorchScript's executor switches, cuDNN and the
CUDA cache.

TorchScript's switches (`ENABLE_JIT_PROFILING`, `ENABLE_JIT_EXECUTOR`, `ENABLE_TENSOR_FUSER`)
and `DISABLE_CUDNN` are process-wide in torch. As in Triton, a model that sets one sets it
before each of its executions and leaves it so; a model that does not set it changes nothing.

The grad mode (inference mode or no_grad) and TorchScript's optimized execution are the
calling thread's in torch. An instance's executions all run on its own thread, so they are set
there once and kept, not entered and left around each batch: on the CNN of bench/cnn_bench.py
at one connection that was 30 us of a 720 us execution (the interpreter's caches are cold
after a forward).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from naiad.backend import ModelConfig

__all__ = ["ExecutionSettings", "parameter_key"]

log = logging.getLogger("naiad.backends.pytorch")

# The modes set on each thread that has run an execution (see the module's docstring).
_thread_modes = threading.local()

# TorchScript's process-wide switches, by Triton's parameter name.
_JIT_SWITCHES: dict[str, Callable[[bool], object]] = {
    "ENABLE_JIT_PROFILING": torch._C._jit_set_profiling_mode,
    "ENABLE_JIT_EXECUTOR": torch._C._jit_set_profiling_executor,
    "ENABLE_TENSOR_FUSER": torch._C._jit_set_texpr_fuser_enabled,
}


def parameter_key(config: ModelConfig, key: str) -> str:
    """Triton's parameter name, or its lower-case spelling when the config uses that."""
    return key if config.parameter(key) is not None or config.parameter(key.lower()) is None else key.lower()


def _optional_bool(config: ModelConfig, key: str) -> bool | None:
    """A true/false parameter, or None when the config does not set it."""
    key = parameter_key(config, key)
    text = config.parameter(key)
    if text is None or not text.strip():
        return None
    return config.bool_parameter(key, False)


@dataclass(frozen=True, slots=True)
class ExecutionSettings:
    inference_mode: bool = True  # INFERENCE_MODE; false runs under torch.no_grad
    optimized_execution: bool = True  # not DISABLE_OPTIMIZED_EXECUTION
    jit_switches: tuple[tuple[Callable[[bool], object], bool], ...] = ()
    cudnn: bool | None = None  # not DISABLE_CUDNN, when set
    cache_cleaning: bool = False  # ENABLE_CACHE_CLEANING: empty the CUDA cache after each execution

    @classmethod
    def of(cls, config: ModelConfig) -> ExecutionSettings:
        """Read from the config; a value that is not true/false fails the load naming it."""
        if _optional_bool(config, "ENABLE_NVFUSER"):
            # Triton's PyTorch backend turns NvFuser off whatever the config says; torch has dropped it.
            log.warning("model '%s': ENABLE_NVFUSER is not supported and is ignored (as Triton does)", config.name)
        # ENABLE_WEIGHT_SHARING is read for its check only: instances on one device always
        # share one module here (model.py).
        _optional_bool(config, "ENABLE_WEIGHT_SHARING")
        switches = tuple(
            (setter, value)
            for key, setter in _JIT_SWITCHES.items()
            if (value := _optional_bool(config, key)) is not None
        )
        disable_cudnn = _optional_bool(config, "DISABLE_CUDNN")
        return cls(
            inference_mode=config.bool_parameter(parameter_key(config, "INFERENCE_MODE"), True),
            optimized_execution=not config.bool_parameter(parameter_key(config, "DISABLE_OPTIMIZED_EXECUTION"), False),
            jit_switches=switches,
            cudnn=None if disable_cudnn is None else not disable_cudnn,
            cache_cleaning=bool(_optional_bool(config, "ENABLE_CACHE_CLEANING")),
        )

    def context(
        self, torchscript: bool, device: torch.device, stream: torch.cuda.Stream | None = None
    ) -> contextlib.ExitStack:
        """What one execution runs under; the switches are set on entry, the calling thread's
        modes kept from its last execution (`hold_thread_modes`). On a GPU, work is queued on
        `stream` (the instance's) when given."""
        self.hold_thread_modes(torchscript)
        stack = contextlib.ExitStack()
        if torchscript:
            for setter, value in self.jit_switches:
                setter(value)
        if device.type == "cuda":
            if self.cudnn is not None:
                torch.backends.cudnn.enabled = self.cudnn
            stack.enter_context(torch.cuda.device(device))
            if stream is not None:
                stack.enter_context(torch.cuda.stream(stream))
            if self.cache_cleaning:
                stack.callback(torch.cuda.empty_cache)
        return stack

    def hold_thread_modes(self, torchscript: bool) -> None:
        """Put the calling thread in this model's grad mode and, for TorchScript, its
        optimized-execution setting, and leave it so (nothing to do when it already is)."""
        wanted = (self.inference_mode, self.optimized_execution if torchscript else None)
        state = _thread_modes
        if getattr(state, "wanted", None) == wanted:
            return
        held = getattr(state, "inference", None)
        if held is not None:
            held.__exit__(None, None, None)
        if self.inference_mode:
            state.inference = torch.inference_mode()
            state.inference.__enter__()
        else:
            state.inference = None
            torch.set_grad_enabled(False)
        if torchscript:
            torch._C._set_graph_executor_optimize(self.optimized_execution)
        state.wanted = wanted
