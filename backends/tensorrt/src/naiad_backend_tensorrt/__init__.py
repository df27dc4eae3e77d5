"""naiad's TensorRT backend: serialized engines (`model.plan`, platform `tensorrt_plan`)
run on NVIDIA GPUs through TensorRT's Python API, with device memory and streams from
cuda-python.

Importing this package imports neither TensorRT nor CUDA; a model load does.
"""

from .backend import TensorRTBackend

__all__ = ["TensorRTBackend"]
