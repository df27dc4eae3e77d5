"""`PyTorchBackend`: the process-wide part of the PyTorch backend.

`--backend-config pytorch,default-max-batch-size=N` sets the max_batch_size auto-complete
gives an exported program whose inputs have a dynamic first dimension (default 4).
"""

from __future__ import annotations

from naiad.backend import Backend, BackendContext, Model, ModelContext
from naiad.backend.helpers import read_settings

from .settings import PyTorchBackendSettings

__all__ = ["PyTorchBackend"]


class PyTorchBackend(Backend):
    name = "pytorch"
    abi_version = (2, 6)  # Batch.stack(concatenate=)
    default_model_filename = "model.pt"

    def runs_on_gpus(self) -> bool:
        """A CUDA build of torch that sees a device (a CPU build on a GPU machine does not)."""
        import torch

        return bool(torch.cuda.is_available())

    def initialize(self, context: BackendContext) -> None:
        super().initialize(context)
        self.settings = read_settings(PyTorchBackendSettings, self.name, context.config)

    def create_model(self, context: ModelContext) -> Model:
        from .model import TorchModel

        return TorchModel(context, self)
