"""The TensorFlow backend object: process-wide settings, and a model per version."""

from __future__ import annotations

import dataclasses
import importlib
import threading

from naiad.backend import Backend, BackendContext, Model, ModelContext

from .settings import BackendSettings, parse_backend_settings

__all__ = ["TensorFlowBackend"]

# Everything the backend imports from TensorFlow. Models load in parallel threads, and two
# threads importing TensorFlow's modules at once can deadlock on Python's module locks, so
# the first model imports them all under one lock.
_TENSORFLOW_MODULES = (
    "tensorflow",
    "tensorflow.core.framework.graph_pb2",
    "tensorflow.core.framework.types_pb2",
    "tensorflow.core.protobuf.saved_model_pb2",
    "tensorflow.python.util.deprecation",
)
_TENSORFLOW_ATTRIBUTES = (
    "compat.v1.Session",
    "compat.v1.ConfigProto",
    "compat.v1.saved_model.loader.load",
    "graph_util.import_graph_def",
    "config.list_physical_devices",
    "bfloat16.as_numpy_dtype",
)


class TensorFlowBackend(Backend):
    """Serves `tensorflow_savedmodel` and `tensorflow_graphdef` models.

    `default_model_filename` is the SavedModel's; a GraphDef model's `model.graphdef` is
    chosen by the model itself from its platform.
    """

    name = "tensorflow"
    abi_version = (2, 2)  # Backend.runs_on_gpus
    default_model_filename = "model.savedmodel"

    def runs_on_gpus(self) -> bool:
        """A TensorFlow build that sees a GPU (tensorflow-cpu never does)."""
        self._import_tensorflow()
        return bool(importlib.import_module("tensorflow").config.list_physical_devices("GPU"))

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        settings = parse_backend_settings(context.config)
        budget = context.thread_budget()
        if settings.intra_op_threads == 0 and budget is not None:
            # TensorFlow sizes its pools from the machine's cores; under a CPU limit, the limit's.
            settings = dataclasses.replace(settings, intra_op_threads=budget)
        self.settings: BackendSettings = settings
        self._import_lock = threading.Lock()
        self._imported = False

    def _import_tensorflow(self) -> None:
        with self._import_lock:
            if not self._imported:
                for name in _TENSORFLOW_MODULES:
                    importlib.import_module(name)
                # Attributes TensorFlow resolves lazily (through more imports) on first use.
                tf = importlib.import_module("tensorflow")
                for path in _TENSORFLOW_ATTRIBUTES:
                    target = tf
                    for part in path.split("."):
                        target = getattr(target, part)
                self._imported = True

    def create_model(self, context: ModelContext) -> Model:
        from .model import TensorFlowModel

        self._import_tensorflow()
        return TensorFlowModel(context, self.settings)
