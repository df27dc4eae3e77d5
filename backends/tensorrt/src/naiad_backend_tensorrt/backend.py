"""The TensorRT backend object: one TensorRT runtime and logger per server process."""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any

from naiad.backend import Backend, BackendContext, Model, ModelContext, NaiadError
from naiad.backend.helpers import read_settings

from .settings import TensorRTBackendSettings

__all__ = ["TensorRTBackend"]

log = logging.getLogger("naiad.backends.tensorrt")


class TensorRTBackend(Backend):
    """Serves `tensorrt_plan` models (`model.plan`).

    `--backend-config tensorrt,plugins=/path/a.so;/path/b.so` loads TensorRT plugin
    libraries before any engine is deserialized (Triton's setting of the same name).
    """

    name = "tensorrt"
    abi_version = (2, 1)  # ModelConfig.user_wrote
    default_model_filename = "model.plan"

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        self.settings = read_settings(TensorRTBackendSettings, self.name, context.config)
        self._plugin_paths = [p for p in self.settings.plugins.split(";") if p.strip()]
        self._runtime: Any = None
        self._lock = threading.Lock()
        self.logger: Any = None

    def runtime(self, trt: Any) -> Any:
        """The shared `trt.Runtime`, made on first use (TensorRT is imported by then)."""
        with self._lock:
            if self._runtime is None:
                for path in self._plugin_paths:
                    try:
                        ctypes.CDLL(path.strip(), mode=ctypes.RTLD_GLOBAL)
                    except OSError as exc:
                        raise NaiadError.unavailable(
                            f"--backend-config tensorrt,plugins: cannot load {path.strip()}: {exc}"
                        ) from None
                from .trt_logger import make_logger

                self.logger = make_logger(trt)
                trt.init_libnvinfer_plugins(self.logger, "")
                self._runtime = trt.Runtime(self.logger)
            return self._runtime

    def create_model(self, context: ModelContext) -> Model:
        from .model import TensorRTModel

        return TensorRTModel(context, self)

    def finalize(self) -> None:
        self._runtime = None
