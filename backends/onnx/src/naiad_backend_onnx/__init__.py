"""naiad's ONNX Runtime backend: serves `model.onnx` under the backend name `onnxruntime`
(platform `onnxruntime_onnx`). The backend class is `naiad_backend_onnx.backend.OnnxRuntimeBackend`;
nothing is imported here so plugin discovery stays cheap."""

__all__: list[str] = []
