"""TensorFlow models built at test time, and an in-process server serving them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from naiad import InferenceRequest, Server, ServerOptions, Tensor

WEIGHTS = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0


def build_module():
    """A tf.Module with four signatures: `serving_default` (x @ w + 1, and upper-cased
    strings), `double` (x * 2, INT64), `half` (BF16 in, BF16 and BOOL out) and `parse`
    (strings to numbers, failing on text that is not a number)."""
    import tensorflow as tf

    class Scorer(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(WEIGHTS)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, 4], tf.float32, name="x"),
                tf.TensorSpec([None], tf.string, name="s"),
            ]
        )
        def serve(self, x, s):
            scores = tf.identity(tf.matmul(x, self.w) + 1.0, name="scores")
            upper = tf.identity(tf.strings.upper(s), name="upper")
            return {"y": scores, "upper": upper}

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.int64, name="x")])
        def double(self, x):
            return {"doubled": x * 2}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def parse(self, text):
            return {"number": tf.strings.to_number(text, tf.float32)}

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.bfloat16, name="h")])
        def half(self, h):
            return {"halved": h / tf.constant(2.0, tf.bfloat16), "positive": h > tf.constant(0.0, tf.bfloat16)}

    return Scorer()


def save_savedmodel(module, directory: Path) -> None:
    import tensorflow as tf

    tf.saved_model.save(
        module,
        str(directory),
        signatures={
            "serving_default": module.serve,
            "double": module.double,
            "half": module.half,
            "parse": module.parse,
        },
    )


def save_graphdef(module, path: Path) -> None:
    """Freeze `serve` (variables become constants) and write the binary GraphDef."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(module.serve.get_concrete_function())
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())


def write_model(repo: Path, name: str, config: str | None, version: int = 1) -> Path:
    version_dir = repo / name / str(version)
    version_dir.mkdir(parents=True)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)
    return version_dir


GRAPHDEF_CONFIG = """platform: "tensorflow_graphdef"
max_batch_size: 8
input [{name: "x" data_type: TYPE_FP32 dims: [4]}, {name: "s" data_type: TYPE_STRING dims: [1]
        reshape: {shape: []}}]
output [{name: "scores" data_type: TYPE_FP32 dims: [3]}, {name: "upper:0" data_type: TYPE_STRING dims: [1]
        reshape: {shape: []}}]
"""


class InProcessServer:
    """A started naiad.Server driven from synchronous tests through its own loop."""

    def __init__(self, options: ServerOptions) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = Server(options)
        self.loop.run_until_complete(self.server.start())

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def infer(self, model: str, **inputs: np.ndarray):
        request = InferenceRequest(model, [Tensor.from_numpy(k, v) for k, v in inputs.items()])
        return self.run(self.server.infer(request))

    def close(self) -> None:
        self.run(self.server.stop())
        self.loop.close()
