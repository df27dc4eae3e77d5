"""Reads a SavedModel's signature from `saved_model.pb` without loading the model, so
auto-complete and the config check are cheap and run before any session exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from naiad.backend import ConfigError

from .dtypes import datatype_of_tf
from .model_tensors import ModelSignature, ModelTensor

__all__ = ["DEFAULT_SIGNATURE", "DEFAULT_TAG", "read_saved_model", "choose_meta_graph", "signature_of"]

DEFAULT_SIGNATURE = "serving_default"
DEFAULT_TAG = "serve"


def read_saved_model(directory: Path, model: str) -> Any:
    """The `SavedModel` message of a SavedModel directory (binary or text form)."""
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    message = saved_model_pb2.SavedModel()
    binary, text = directory / "saved_model.pb", directory / "saved_model.pbtxt"
    if binary.is_file():
        try:
            message.ParseFromString(binary.read_bytes())
        except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError or RuntimeError
            raise ConfigError(model, f"{binary} is not a readable SavedModel: {exc}") from None
    elif text.is_file():
        try:
            text_format.Parse(text.read_text(), message)
        except text_format.ParseError as exc:
            raise ConfigError(model, f"{text} is not a readable SavedModel: {exc}") from None
    else:
        what = "is not a directory" if not directory.is_dir() else "holds no saved_model.pb"
        raise ConfigError(
            model,
            f"platform tensorflow_savedmodel: {directory} {what}; a SavedModel is a directory "
            "written by tf.saved_model.save",
        )
    return message


def choose_meta_graph(saved_model: Any, tag: str, model: str) -> Any:
    """The meta graph carrying `tag` ("serve" unless TF_GRAPH_TAG says otherwise); a model
    with a single meta graph is used whatever its tags when no tag was asked for."""
    graphs = list(saved_model.meta_graphs)
    wanted = tag or DEFAULT_TAG
    for graph in graphs:
        if wanted in graph.meta_info_def.tags:
            return graph
    if not tag and len(graphs) == 1:
        return graphs[0]
    found = sorted({t for g in graphs for t in g.meta_info_def.tags})
    raise ConfigError(
        model, f"parameters TF_GRAPH_TAG: the SavedModel has no meta graph tagged '{wanted}' (tags: {found})"
    )


def signature_of(meta_graph: Any, name: str, model: str) -> ModelSignature:
    """The inputs and outputs of signature `name` ("serving_default" unless
    TF_SIGNATURE_DEF says otherwise)."""
    wanted = name or DEFAULT_SIGNATURE
    signatures = meta_graph.signature_def
    if wanted not in signatures:
        usable = sorted(k for k in signatures if not k.startswith("__"))
        raise ConfigError(
            model,
            f"parameters TF_SIGNATURE_DEF: the SavedModel has no signature '{wanted}' "
            f"(signatures: {usable}); name one with the TF_SIGNATURE_DEF parameter",
        )
    signature = signatures[wanted]
    return ModelSignature(
        inputs={key: _tensor(key, info) for key, info in signature.inputs.items()},
        outputs={key: _tensor(key, info) for key, info in signature.outputs.items()},
    )


def _tensor(key: str, info: Any) -> ModelTensor:
    from tensorflow.core.framework import types_pb2

    tf_dtype = types_pb2.DataType.Name(info.dtype)
    shape_proto = info.tensor_shape
    if not info.HasField("tensor_shape") or shape_proto.unknown_rank:
        shape = None
    else:
        shape = tuple(int(d.size) for d in shape_proto.dim)
    return ModelTensor(key, info.name, tf_dtype, datatype_of_tf(tf_dtype), shape)
