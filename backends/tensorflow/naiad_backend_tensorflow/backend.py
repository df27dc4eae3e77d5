"""The TensorFlow backend object: process-wide settings, and a model per version."""

from __future__ import annotations

from naiad import Backend, BackendContext, Model, ModelContext

from .settings import BackendSettings, parse_backend_settings

__all__ = ["TensorFlowBackend"]


class TensorFlowBackend(Backend):
    """Serves `tensorflow_savedmodel` and `tensorflow_graphdef` models.

    `default_model_filename` is the SavedModel's; a GraphDef model's `model.graphdef` is
    chosen by the model itself from its platform.
    """

    name = "tensorflow"
    default_model_filename = "model.savedmodel"

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        self.settings: BackendSettings = parse_backend_settings(context.config)

    def create_model(self, context: ModelContext) -> Model:
        from .model import TensorFlowModel

        return TensorFlowModel(context, self.settings)
