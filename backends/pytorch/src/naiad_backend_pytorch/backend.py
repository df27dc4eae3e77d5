"""`PyTorchBackend`: the process-wide part of the PyTorch backend.

`--backend-config pytorch,default-max-batch-size=N` sets the max_batch_size auto-complete
gives an exported program whose inputs have a dynamic first dimension (default 4).
"""

from __future__ import annotations

from naiad.backend import Backend, BackendContext, ConfigError, Model, ModelContext

__all__ = ["PyTorchBackend"]


class PyTorchBackend(Backend):
    name = "pytorch"
    default_model_filename = "model.pt"

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        text = context.config.get("default-max-batch-size", "4")
        try:
            self.default_max_batch_size = int(text)
        except ValueError:
            raise ConfigError(
                "pytorch", f"--backend-config pytorch,default-max-batch-size: expected an integer, got '{text}'"
            ) from None

    def create_model(self, context: ModelContext) -> Model:
        from .model import TorchModel

        return TorchModel(context, self)
