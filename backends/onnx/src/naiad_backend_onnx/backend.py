"""`OnnxRuntimeBackend`: the process-wide part of the ONNX Runtime backend.

It reads the `--backend-config onnxruntime,KEY=VALUE` settings Triton's onnxruntime backend
takes: `default-max-batch-size` (what auto-complete gives a model whose inputs have a
variable first dimension, default 4), `intra_op_thread_count` / `inter_op_thread_count`
(defaults for every model's sessions) and `enable-global-threadpool` (one ORT thread pool for
every session instead of one per session).
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from naiad.backend import Backend, BackendContext, Model, ModelContext

from .settings import read_backend_settings

__all__ = ["OnnxRuntimeBackend"]

log = logging.getLogger("naiad.backends.onnxruntime")


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    abi_version = (2, 2)  # Backend.runs_on_gpus
    default_model_filename = "model.onnx"

    def runs_on_gpus(self) -> bool:
        """Only an onnxruntime build with the CUDA execution provider (onnxruntime-gpu)."""
        import onnxruntime as ort

        return "CUDAExecutionProvider" in ort.get_available_providers()

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        settings = read_backend_settings(context.config)
        budget = context.thread_budget()
        if settings.intra_op_threads == 0 and budget is not None:
            # ORT sizes its pools from the machine's cores; under a CPU limit, the limit's.
            settings = dataclasses.replace(settings, intra_op_threads=budget)
        self.settings = settings
        self._global_pool_ready = False
        self._global_pool_lock = threading.Lock()

    def ensure_global_thread_pool(self) -> None:
        """ORT allows one global pool per process, created before the first session that
        uses it; create it once, lazily."""
        if not self.settings.global_thread_pool:
            return
        with self._global_pool_lock:
            if self._global_pool_ready:
                return
            import onnxruntime as ort

            # Sizes must be set before the first session that uses the pool is created.
            try:
                ort.set_global_thread_pool_sizes(self.settings.intra_op_threads, self.settings.inter_op_threads)
            except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail class
                # Another user of onnxruntime in this process created them first.
                log.warning("onnxruntime global thread pools already exist; sizes not applied: %s", exc)
            self._global_pool_ready = True

    def create_model(self, context: ModelContext) -> Model:
        from .model import OnnxModel

        return OnnxModel(context, self)
