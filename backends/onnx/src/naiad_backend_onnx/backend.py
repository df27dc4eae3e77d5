"""`OnnxRuntimeBackend`: the process-wide part of the ONNX Runtime backend.

It reads the `--backend-config onnxruntime,KEY=VALUE` settings Triton's onnxruntime backend
takes: `default-max-batch-size` (what auto-complete gives a model whose inputs have a
variable first dimension, default 4), `intra_op_thread_count` / `inter_op_thread_count`
(defaults for every model's sessions) and `enable-global-threadpool` (one ORT thread pool for
every session instead of one per session).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from naiad.backend import Backend, BackendContext, ConfigError, Model, ModelContext

__all__ = ["OnnxRuntimeBackend", "OnnxBackendSettings"]

log = logging.getLogger("naiad.backends.onnxruntime")


@dataclass(frozen=True, slots=True)
class OnnxBackendSettings:
    default_max_batch_size: int = 4
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    global_thread_pool: bool = False


def _int_setting(config: dict[str, str], key: str, default: int) -> int:
    text = config.get(key)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError("onnxruntime", f"--backend-config onnxruntime,{key}: expected an integer, got '{text}'") from None
    if value < 0:
        raise ConfigError("onnxruntime", f"--backend-config onnxruntime,{key}: must not be negative, got {value}")
    return value


def read_backend_settings(config: dict[str, str]) -> OnnxBackendSettings:
    pool = config.get("enable-global-threadpool", "0").strip().lower()
    return OnnxBackendSettings(
        default_max_batch_size=_int_setting(config, "default-max-batch-size", 4),
        intra_op_threads=_int_setting(config, "intra_op_thread_count", 0),
        inter_op_threads=_int_setting(config, "inter_op_thread_count", 0),
        global_thread_pool=pool in ("1", "true", "yes", "on"),
    )


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    default_model_filename = "model.onnx"

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        self.settings = read_backend_settings(context.config)
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
