"""TensorFlow sessions holding one loaded model: a SavedModel through the SavedModel
loader, a frozen GraphDef through `import_graph_def`. Both run through `Session.run`,
which feeds and fetches by tensor name, honours per-session thread pools, and releases
the GIL while TensorFlow computes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from naiad.backend import ConfigError

from .settings import BackendSettings, ModelSettings

__all__ = [
    "ModelSession",
    "session_config",
    "open_savedmodel",
    "open_graphdef",
    "import_graphdef",
    "read_graphdef",
    "read_init_ops",
]


@dataclass
class ModelSession:
    """One session with the model's graph in it; `feeds`/`fetches` map config names to
    graph tensor names."""

    session: Any
    graph: Any
    feeds: dict[str, str]
    fetches: dict[str, str]
    # Inputs whose data arrive as BF16 words (naiad's uint16 form).
    bf16_inputs: frozenset[str] = frozenset()

    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        feed = {
            self.feeds[name]: array.view(_bfloat16()) if name in self.bf16_inputs else array
            for name, array in inputs.items()
        }
        fetch = {name: self.fetches[name] for name in outputs}
        results = self.session.run(fetch, feed_dict=feed)
        return {name: _from_tf(np.asarray(value)) for name, value in results.items()}

    def close(self) -> None:
        self.session.close()


def _bfloat16() -> np.dtype:
    # naiad carries BF16 as uint16 words; TensorFlow wants its bfloat16 numpy type.
    import tensorflow as tf

    return np.dtype(tf.bfloat16.as_numpy_dtype)


def _from_tf(array: np.ndarray) -> np.ndarray:
    if array.dtype.name == "bfloat16":
        return array.view(np.uint16)
    return array


def session_config(backend: BackendSettings, model: ModelSettings, gpu_id: int | None) -> Any:
    """The session's ConfigProto: thread pools, soft placement, and for CPU instances no
    GPU at all (so a CPU instance never grabs GPU memory)."""
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=model.intra_op_threads,
        inter_op_parallelism_threads=model.inter_op_threads,
        use_per_session_threads=model.per_session_threads,
        allow_soft_placement=backend.allow_soft_placement,
    )
    if gpu_id is None:
        config.device_count["GPU"] = 0
    elif backend.gpu_memory_fraction > 0:
        config.gpu_options.per_process_gpu_memory_fraction = backend.gpu_memory_fraction
    else:
        config.gpu_options.allow_growth = True
    return config


def _device(gpu_id: int | None) -> str:
    return "/device:CPU:0" if gpu_id is None else f"/device:GPU:{gpu_id}"


def open_savedmodel(
    directory: Path, tags: list[str], feeds: dict[str, str], fetches: dict[str, str], config: Any, gpu_id: int | None
) -> ModelSession:
    import tensorflow as tf

    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph, config=config)
    try:
        with graph.as_default(), tf.device(_device(gpu_id)), _QuietDeprecations():
            tf.compat.v1.saved_model.loader.load(session, tags, str(directory))
    except BaseException:
        session.close()
        raise
    return ModelSession(session, graph, feeds, fetches)


def read_graphdef(path: Path, model: str) -> Any:
    """The GraphDef message of a frozen graph file."""
    from tensorflow.core.framework import graph_pb2

    if not path.is_file():
        raise ConfigError(model, f"platform tensorflow_graphdef: no model file {path}")
    graph_def = graph_pb2.GraphDef()
    try:
        graph_def.ParseFromString(path.read_bytes())
    except Exception as exc:  # noqa: BLE001 - DecodeError or RuntimeError by protobuf implementation
        raise ConfigError(model, f"{path} is not a binary GraphDef: {exc}") from None
    return graph_def


def import_graphdef(graph_def: Any, gpu_id: int | None) -> Any:
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default(), tf.device(_device(gpu_id)):
        tf.graph_util.import_graph_def(graph_def, name="")
    return graph


def open_graphdef(
    graph_def: Any,
    feeds: dict[str, str],
    fetches: dict[str, str],
    config: Any,
    gpu_id: int | None,
    init_ops: list[str],
) -> ModelSession:
    import tensorflow as tf

    graph = import_graphdef(graph_def, gpu_id)
    session = tf.compat.v1.Session(graph=graph, config=config)
    try:
        if init_ops:
            session.run([graph.get_operation_by_name(name) for name in init_ops])
    except BaseException:
        session.close()
        raise
    return ModelSession(session, graph, feeds, fetches)


def read_init_ops(filename: str, version_path: Path, model_path: Path, model: str) -> list[str]:
    """TF_INIT_OPS_FILE: `{"init_ops": [...]}`, looked up in the version directory first,
    then the model directory."""
    if not filename:
        return []
    for directory in (version_path, model_path):
        path = directory / filename
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                ops = data["init_ops"]
                if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
                    raise TypeError("'init_ops' must be a list of operation names")
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(model, f"parameters TF_INIT_OPS_FILE: {path} is not valid: {exc}") from None
            return ops
    raise ConfigError(model, f"parameters TF_INIT_OPS_FILE: '{filename}' is in neither {version_path} nor {model_path}")


class _QuietDeprecations:
    """The v1 loader logs a deprecation warning on every call; it is the right API for
    sessions, so keep the log clean."""

    def __enter__(self) -> None:
        try:
            from tensorflow.python.util import deprecation

            self._context = deprecation.silence()
            self._context.__enter__()
        except Exception:  # noqa: BLE001 - a private module; without it we just log more
            self._context = None

    def __exit__(self, *exc: object) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)
