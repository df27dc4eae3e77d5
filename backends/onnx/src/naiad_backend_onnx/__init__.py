"""naiad's ONNX Runtime backend: serves `model.onnx` under the backend name `onnxruntime`
(platform `onnxruntime_onnx`)."""

from .backend import OnnxRuntimeBackend

__all__ = ["OnnxRuntimeBackend"]
