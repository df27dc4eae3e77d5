"""ONNX Runtime's tensor type strings ("tensor(float)") and Triton's datatypes."""

from __future__ import annotations

__all__ = ["ORT_TYPE_TO_DATATYPE", "datatype_of_ort_type"]

ORT_TYPE_TO_DATATYPE: dict[str, str] = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(bfloat16)": "BF16",
    "tensor(string)": "BYTES",
}


def datatype_of_ort_type(ort_type: str) -> str | None:
    """The Triton datatype for an ORT type string; None for types Triton cannot carry
    (sequences, maps, float8, 4-bit integers)."""
    return ORT_TYPE_TO_DATATYPE.get(ort_type)
