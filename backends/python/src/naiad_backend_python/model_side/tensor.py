"""`Tensor`: a named input or output of a model: a numpy array and its Triton datatype, or, as
in Triton, memory on a GPU (device_array.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .device_array import KDL_CUDA, DeviceArray, device_array
from .dlpack_host import dlpack_device, host_array
from .dtypes import datatype_of_dtype, type_number
from .errors import TritonModelException, text_argument
from .flags import TRITONSERVER_MEMORY_CPU

if TYPE_CHECKING:
    from .inference_request import InferenceRequest
    from .inference_response import InferenceResponse

__all__ = ["Tensor", "PreferredMemory", "get_input_tensor_by_name", "get_output_tensor_by_name"]


class Tensor:
    """A named input or output: a numpy array and its Triton datatype, or a GPU tensor
    (`_device`; `_array` is None then)."""

    __slots__ = ("_name", "_array", "_datatype", "_device")

    def __init__(self, name: str, tensor: Any, datatype: str | None = None) -> None:
        name = text_argument(name, "Tensor name")
        if tensor is None:
            raise TypeError(f"tensor '{name}': the data must be a numpy array, got None")
        array = tensor if isinstance(tensor, np.ndarray) else np.asarray(tensor)
        if datatype is None:
            datatype = datatype_of_dtype(array.dtype)
            if datatype is None:
                raise TritonModelException(f"tensor '{name}': numpy dtype {array.dtype} has no Triton datatype")
        if datatype == "BYTES" and array.dtype.kind in ("U", "S"):
            # Fixed-width string arrays pad and strip; BYTES elements are exact bytes.
            converted = np.empty(array.shape, dtype=object)
            converted.reshape(-1)[:] = [
                item.encode("utf-8") if isinstance(item, str) else bytes(item) for item in array.reshape(-1)
            ]
            array = converted
        self._name = name
        self._array = array
        self._datatype = datatype
        self._device: DeviceArray | None = None

    @classmethod
    def _trusted(cls, name: str, array: np.ndarray, datatype: str) -> Tensor:
        """A tensor decoded from a message: its parts are already checked, so none of the
        constructor's conversions apply (a request's inputs are built on every execute)."""
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array
        tensor._datatype = datatype
        tensor._device = None
        return tensor

    @classmethod
    def _on_device(cls, name: str, datatype: str, device: DeviceArray) -> Tensor:
        tensor = cls._trusted(name, None, datatype)  # type: ignore[arg-type]
        tensor._device = device
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        if self._device is not None:
            raise TritonModelException(
                f"tensor '{self._name}' is stored in GPU memory and cannot be converted to NumPy "
                "(read it with to_dlpack)"
            )
        return self._array

    def _host(self) -> np.ndarray:
        """The values in host memory, copied there from a GPU."""
        return self._array if self._device is None else self._device.to_host()

    def shape(self) -> tuple[int, ...]:
        return self._device.shape if self._device is not None else tuple(self._array.shape)

    def triton_dtype(self) -> int:
        return type_number(self._datatype)

    def datatype(self) -> str:
        """The KServe datatype name ("FP32", "BYTES", ...)."""
        return self._datatype

    def is_cpu(self) -> bool:
        return self._device is None

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """A GPU tensor's memory, for `torch.as_tensor(t, device="cuda")` and `cupy.asarray(t)`."""
        if self._device is None:
            raise AttributeError(f"tensor '{self._name}' is in host memory: it has no __cuda_array_interface__")
        return self._device.__cuda_array_interface__

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the tensor, in host or GPU memory as it is (for
        `torch.from_dlpack` and friends)."""
        return self.__dlpack__()

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:  # max_version, copy: newer consumers
        if self._device is not None:
            return self._device.dlpack()
        if self._datatype == "BYTES":
            raise TritonModelException(f"tensor '{self._name}': BYTES tensors have no DLPack form")
        return np.ascontiguousarray(self._array).__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0) if self._device is None else (KDL_CUDA, self._device.device_id)

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor: Any) -> Tensor:
        """A Tensor from an object with `__dlpack__` (torch, cupy, numpy...) or a DLPack
        capsule. A tensor on a GPU stays there, as in Triton (`is_cpu()` is false)."""
        if str(getattr(dlpack_tensor, "dtype", "")) == "torch.bfloat16":
            # numpy has no bfloat16: carry the raw 16-bit words, as naiad does for BF16.
            import torch  # a torch tensor was passed, so torch is importable

            words = dlpack_tensor.detach().cpu().contiguous().view(torch.int16)
            return Tensor(name, np.from_dlpack(words).view(np.uint16), "BF16")
        try:
            device_type, device_id = dlpack_device(dlpack_tensor)
            if device_type == KDL_CUDA:
                on_device = device_array(dlpack_tensor, device_id)
                datatype = None if on_device is None else datatype_of_dtype(on_device.dtype)
                if on_device is not None and datatype is not None and datatype != "BYTES":
                    return Tensor._on_device(name, datatype, on_device)
            array = host_array(dlpack_tensor)
        except (RuntimeError, TypeError, ValueError, BufferError) as exc:
            raise TritonModelException(f"tensor '{name}': cannot read DLPack tensor: {exc}") from exc
        return Tensor(name, array)

    def __repr__(self) -> str:
        place = "" if self._device is None else f", on cuda:{self._device.device_id}"
        return f"Tensor({self._name!r}, {self._datatype}, shape={list(self.shape())}{place})"


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request.inputs():
        if tensor._name == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


class PreferredMemory:
    """Accepted for BLS requests; tensors always travel in host memory here."""

    def __init__(self, preferred_memory_type: int = TRITONSERVER_MEMORY_CPU, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id
