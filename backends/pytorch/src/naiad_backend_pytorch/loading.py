"""Finds and loads a model file: TorchScript (`torch.jit.save`) or an exported program
(`torch.export.save`), told apart by what the file holds rather than its name."""

from __future__ import annotations

import logging
import threading
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import torch

from naiad.backend import ConfigError

__all__ = [
    "LoadedModule",
    "find_model_file",
    "load_module",
    "is_exported_program",
    "optimized_for_inference",
    "torch_message",
]

log = logging.getLogger("naiad.backends.pytorch")

# torch.export.load keeps its deserializer in module-level state and fails when two threads
# load at once ("_CURRENT_DESERIALIZER is already set"); the server loads models in
# parallel, so loads are serialized. The state is per process, hence a per-process lock.
_LOAD_LOCK = threading.Lock()


@dataclass(slots=True)
class LoadedModule:
    """A callable module on one device, with what is known of its signature."""

    module: Callable[..., Any]
    kind: str  # "torchscript" | "export"
    arg_names: list[str]
    program: Any = None  # the ExportedProgram, for auto-complete
    optimized: bool = False  # optimized_for_inference has been applied (or tried)


def torch_message(exc: BaseException) -> str:
    """TorchScript errors carry the scripted traceback; the last line says what broke."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def find_model_file(version_path: Path, filename: str, model: str) -> Path:
    """`filename` in the version directory; a config naming no file also finds `model.pt2`
    (the core picks this backend for a directory holding only `model.pt2`)."""
    path = version_path / filename
    if path.is_file():
        return path
    if filename == "model.pt" and (version_path / "model.pt2").is_file():
        return version_path / "model.pt2"
    raise ConfigError(
        model,
        f"model file not found: {path} (set default_model_filename in the config if the file has another name)",
    )


def is_exported_program(path: Path) -> bool:
    """torch.export archives hold `archive_format` / `serialized_exported_program`
    entries; TorchScript archives hold `constants.pkl` and `code/`."""
    if path.suffix == ".pt2":
        return True
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return any(name.endswith("archive_format") or "serialized_exported_program" in name for name in names)


def load_module(path: Path, device: torch.device, model: str) -> LoadedModule:
    with _LOAD_LOCK:
        return _load(path, device, model)


def _load(path: Path, device: torch.device, model: str) -> LoadedModule:
    try:
        if is_exported_program(path):
            program = torch.export.load(str(path))
            module = program.module()
            if device.type != "cpu":
                module = module.to(device)
            signature = program.module_call_graph[0].signature
            names = (
                list(signature.forward_arg_names)
                if signature is not None
                else list(program.graph_signature.user_inputs)
            )
            return LoadedModule(module, "export", names, program)
        with warnings.catch_warnings():
            # torch 2.9+ deprecates TorchScript; Triton repositories are full of it.
            warnings.simplefilter("ignore", DeprecationWarning)
            scripted = torch.jit.load(str(path), map_location=device)
        scripted.eval()
        names = [argument.name for argument in scripted.forward.schema.arguments[1:]]
        return LoadedModule(scripted, "torchscript", names)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types here
        raise ConfigError(model, f"torch cannot load {path.name}: {type(exc).__name__}: {exc}") from None


def optimized_for_inference(loaded: LoadedModule, model: str) -> LoadedModule:
    """TorchScript frozen and rewritten for inference (`torch.jit.optimize_for_inference`):
    weights become constants, conv+batch-norm fold, and on the CPU convolutions run in
    oneDNN's layout. On this project's CNN that is 1.15-1.3x torch's own rate at batch 1
    (docs/backends/pytorch.md). Attributes that forward mutates stay attributes, so a model's
    state is kept. A module torch cannot optimize is served as it was loaded."""
    if loaded.kind != "torchscript" or loaded.optimized:
        return loaded
    # In a thread that ends with it: torch's OpenMP keeps a pool of workers per calling thread
    # until that thread ends, and a pool left in the loading thread would stop every instance
    # thread's pool from spinning (libgomp throttles once more threads are pooled than there
    # are CPUs): the CNN of bench/cnn_bench.py at batch 1 fell from 1,330 to 730 requests/s
    # in-process that way. (Setting one thread here instead would change torch's process-wide
    # default while instance threads may be taking it.)
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="naiad-torch-optimize") as thread:
            module = thread.submit(torch.jit.optimize_for_inference, loaded.module).result()
    except Exception as exc:  # noqa: BLE001 - torch raises many types here
        log.warning(
            "model '%s': served without torch.jit.optimize_for_inference, which failed: %s: %s "
            "(set parameter OPTIMIZE_FOR_INFERENCE to false to skip it)",
            model,
            type(exc).__name__,
            torch_message(exc),
        )
        return replace(loaded, optimized=True)
    return replace(loaded, module=module, optimized=True)
