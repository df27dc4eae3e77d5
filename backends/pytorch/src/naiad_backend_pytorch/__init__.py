"""naiad's PyTorch backend: TorchScript `model.pt` and `torch.export` programs `model.pt2`
under the backend name `pytorch` (platform `pytorch_libtorch`)."""

__all__: list[str] = []
