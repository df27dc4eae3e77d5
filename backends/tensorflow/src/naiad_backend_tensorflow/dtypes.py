"""TensorFlow dtypes and Triton datatypes, by the names TensorFlow's protos use
(`DT_FLOAT`), so the mapping is checked without importing TensorFlow."""

from __future__ import annotations

__all__ = ["datatype_of_tf", "tf_name_of_datatype"]

_TF_TO_DATATYPE: dict[str, str] = {
    "DT_BOOL": "BOOL",
    "DT_UINT8": "UINT8",
    "DT_UINT16": "UINT16",
    "DT_UINT32": "UINT32",
    "DT_UINT64": "UINT64",
    "DT_INT8": "INT8",
    "DT_INT16": "INT16",
    "DT_INT32": "INT32",
    "DT_INT64": "INT64",
    "DT_HALF": "FP16",
    "DT_BFLOAT16": "BF16",
    "DT_FLOAT": "FP32",
    "DT_DOUBLE": "FP64",
    "DT_STRING": "BYTES",
}

_DATATYPE_TO_TF: dict[str, str] = {v: k for k, v in _TF_TO_DATATYPE.items()}


def datatype_of_tf(tf_name: str) -> str | None:
    """`DT_FLOAT` -> `FP32`; None for dtypes Triton has no datatype for (complex,
    quantized, resource, variant). Reference dtypes (`DT_FLOAT_REF`) map like their base."""
    return _TF_TO_DATATYPE.get(tf_name.removesuffix("_REF"))


def tf_name_of_datatype(datatype: str) -> str:
    """`FP32` -> `DT_FLOAT`."""
    return _DATATYPE_TO_TF[datatype]
