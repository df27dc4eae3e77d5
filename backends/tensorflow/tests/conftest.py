"""Builds tiny TensorFlow models at test time and serves them from one in-process server
per test module (TensorFlow's import and the loads are the slow part)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

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

        @tf.function(input_signature=[
            tf.TensorSpec([None, 4], tf.float32, name="x"), tf.TensorSpec([None], tf.string, name="s"),
        ])
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

    tf.saved_model.save(module, str(directory), signatures={
        "serving_default": module.serve, "double": module.double, "half": module.half,
        "parse": module.parse,
    })


def save_graphdef(module, path: Path) -> None:
    """Freeze `serve` (variables become constants) and write the binary GraphDef."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(module.serve.get_concrete_function())
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())


def write_model(repo: Path, name: str, config: str | None, version: int = 1) -> Path:
    version_dir = repo / name / str(version)
    version_dir.mkdir(parents=True)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)
    return version_dir


GRAPHDEF_CONFIG = '''platform: "tensorflow_graphdef"
max_batch_size: 8
input [{name: "x" data_type: TYPE_FP32 dims: [4]}, {name: "s" data_type: TYPE_STRING dims: [1]
        reshape: {shape: []}}]
output [{name: "scores" data_type: TYPE_FP32 dims: [3]}, {name: "upper:0" data_type: TYPE_STRING dims: [1]
        reshape: {shape: []}}]
'''


@pytest.fixture(scope="session")
def module():
    return build_module()


@pytest.fixture(scope="session")
def tf_repo(tmp_path_factory, module) -> Path:
    """The repository every TensorFlow test module serves."""
    repo = tmp_path_factory.mktemp("tf_repo")
    # SavedModel with no config at all: auto-complete fills everything in.
    save_savedmodel(module, write_model(repo, "sm_auto", None) / "model.savedmodel")
    # The same SavedModel, serving the `double` signature by parameter.
    save_savedmodel(module, write_model(repo, "sm_double", '''platform: "tensorflow_savedmodel"
parameters {key: "TF_SIGNATURE_DEF" value {string_value: "double"}}
parameters {key: "TF_NUM_INTRA_THREADS" value {string_value: "1"}}
parameters {key: "TF_NUM_INTER_THREADS" value {string_value: "1"}}
''') / "model.savedmodel")
    # max_batch_size 0 with full-rank dims: auto-complete keeps it unbatched.
    save_savedmodel(module, write_model(repo, "sm_unbatched", '''platform: "tensorflow_savedmodel" max_batch_size: 0
input [{name: "x" data_type: TYPE_FP32 dims: [-1, 4]}, {name: "s" data_type: TYPE_STRING dims: [-1]}]
''') / "model.savedmodel")
    # One output listed by name only: auto-complete fills in its type and dims, leaves "upper" out.
    save_savedmodel(module, write_model(repo, "sm_partial", '''backend: "tensorflow" max_batch_size: 2
output [{name: "y"}]
''') / "model.savedmodel")
    save_savedmodel(module, write_model(repo, "sm_half", '''platform: "tensorflow_savedmodel"
parameters {key: "TF_SIGNATURE_DEF" value {string_value: "half"}}
''') / "model.savedmodel")
    save_savedmodel(module, write_model(repo, "sm_parse", '''platform: "tensorflow_savedmodel"
parameters {key: "TF_SIGNATURE_DEF" value {string_value: "parse"}}
''') / "model.savedmodel")
    save_graphdef(module, write_model(repo, "gd_scores", GRAPHDEF_CONFIG) / "model.graphdef")
    # Only `backend: "tensorflow"`: the model.graphdef file makes it a GraphDef model. Two
    # instances sharing one session.
    backend_only = GRAPHDEF_CONFIG.replace('platform: "tensorflow_graphdef"', 'backend: "tensorflow"') + '''
instance_group [{count: 2, kind: KIND_CPU}]
parameters {key: "MAX_SESSION_SHARE_COUNT" value {string_value: "2"}}
'''
    save_graphdef(module, write_model(repo, "gd_backend_only", backend_only) / "model.graphdef")
    return repo


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


@pytest.fixture(scope="module")
def served(tf_repo) -> InProcessServer:
    server = InProcessServer(ServerOptions([str(tf_repo)], backend_config={"tensorflow": {"intra-op-thread-count": "2"}}))
    assert server.server.startup_failures == []
    yield server
    server.close()
