"""One sequence model in every framework, built at test time: a running sum kept in
implicit state, which also reports the control inputs it was fed.

    OUTPUT = OUTPUT_STATE = INPUT_STATE * (1 - START) + INPUT
    FLAGS = START + 2 * END + 4 * READY
    CORRID_OUT = CORRID

Every tensor is INT32 of dims [1] (CORRID and CORRID_OUT are INT64), with a batch
dimension in front when the model batches. Tensor names follow each framework's
convention: by name for ONNX and TensorFlow; PyTorch binds `value` and `state` by
forward's argument names and the controls by the `__<index>` convention.
"""

from __future__ import annotations

from pathlib import Path

from apart import run_apart

CONTROLS = (("START", "CONTROL_SEQUENCE_START"), ("END", "CONTROL_SEQUENCE_END"), ("READY", "CONTROL_SEQUENCE_READY"))


def config(platform: str, batching: bool, strategy: str, names: dict[str, str]) -> str:
    """config.pbtxt; `names` maps the roles (INPUT, START, END, READY, CORRID, INPUT_STATE,
    OUTPUT, FLAGS, CORRID_OUT, OUTPUT_STATE) to the model's tensor names."""
    controls = ", ".join(
        f'{{name: "{names[role]}" control [{{kind: {kind} int32_false_true: [0, 1]}}]}}' for role, kind in CONTROLS
    )
    controls += f', {{name: "{names["CORRID"]}" control [{{kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64}}]}}'
    return f'''{platform}
max_batch_size: {4 if batching else 0}
input [{{name: "{names["INPUT"]}" data_type: TYPE_INT32 dims: [1]}}]
output [{{name: "{names["OUTPUT"]}" data_type: TYPE_INT32 dims: [1]}},
        {{name: "{names["FLAGS"]}" data_type: TYPE_INT32 dims: [1]}},
        {{name: "{names["CORRID_OUT"]}" data_type: TYPE_INT64 dims: [1]}}]
sequence_batching {{
  {strategy}
  max_sequence_idle_microseconds: 60000000
  control_input [{controls}]
  state [{{input_name: "{names["INPUT_STATE"]}" output_name: "{names["OUTPUT_STATE"]}" data_type: TYPE_INT32
           dims: [1] initial_state {{data_type: TYPE_INT32 dims: [1] zero_data: true name: "zero"}}}}]
}}
instance_group [{{count: 1 kind: KIND_CPU}}]
'''


PLAIN_NAMES = {
    role: role
    for role in (
        "INPUT",
        "START",
        "END",
        "READY",
        "CORRID",
        "INPUT_STATE",
        "OUTPUT",
        "FLAGS",
        "CORRID_OUT",
        "OUTPUT_STATE",
    )
}

TORCH_NAMES = {
    "INPUT": "value",
    "START": "START__1",
    "END": "END__2",
    "READY": "READY__3",
    "CORRID": "CORRID__4",
    "INPUT_STATE": "state",
    "OUTPUT": "OUTPUT__0",
    "FLAGS": "FLAGS__1",
    "CORRID_OUT": "CORRID_OUT__2",
    "OUTPUT_STATE": "OUTPUT_STATE__3",
}


def onnx_model(batching: bool) -> bytes:
    from onnx import TensorProto, helper

    shape = ["batch", 1] if batching else [1]

    def value(name: str, elem_type: int = TensorProto.INT32):
        return helper.make_tensor_value_info(name, elem_type, shape)

    nodes = [
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT32, [], [1])),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT32, [], [2])),
        helper.make_node("Constant", [], ["four"], value=helper.make_tensor("four", TensorProto.INT32, [], [4])),
        helper.make_node("Sub", ["one", "START"], ["keep"]),
        helper.make_node("Mul", ["INPUT_STATE", "keep"], ["kept"]),
        helper.make_node("Add", ["kept", "INPUT"], ["OUTPUT"]),
        helper.make_node("Identity", ["OUTPUT"], ["OUTPUT_STATE"]),
        helper.make_node("Mul", ["END", "two"], ["end2"]),
        helper.make_node("Mul", ["READY", "four"], ["ready4"]),
        helper.make_node("Add", ["START", "end2"], ["start_end"]),
        helper.make_node("Add", ["start_end", "ready4"], ["FLAGS"]),
        helper.make_node("Identity", ["CORRID"], ["CORRID_OUT"]),
    ]
    graph = helper.make_graph(
        nodes,
        "sequence_sum",
        [
            value("INPUT"),
            value("START"),
            value("END"),
            value("READY"),
            value("CORRID", TensorProto.INT64),
            value("INPUT_STATE"),
        ],
        [value("OUTPUT"), value("FLAGS"), value("CORRID_OUT", TensorProto.INT64), value("OUTPUT_STATE")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return model.SerializeToString()


def save_torchscript(path: Path) -> None:

    import torch

    class SequenceSum(torch.nn.Module):
        def forward(
            self,
            value: torch.Tensor,
            start: torch.Tensor,
            end: torch.Tensor,
            ready: torch.Tensor,
            corrid: torch.Tensor,
            state: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
            total = state * (1 - start) + value
            return total, start + 2 * end + 4 * ready, corrid, total

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.save(torch.jit.script(SequenceSum().eval()), str(path))


def save_savedmodels(targets: list[tuple[Path, bool]]) -> None:
    """SavedModels at each (directory, batching); run apart from the test process."""
    for directory, batching in targets:
        _save_savedmodel(directory, batching)


def _save_savedmodel(directory: Path, batching: bool) -> None:
    import tensorflow as tf

    shape = [None, 1] if batching else [1]
    spec = [tf.TensorSpec(shape, tf.int32, name=name) for name in ("INPUT", "START", "END", "READY")]
    spec.append(tf.TensorSpec(shape, tf.int64, name="CORRID"))
    spec.append(tf.TensorSpec(shape, tf.int32, name="INPUT_STATE"))

    class SequenceSum(tf.Module):
        @tf.function(input_signature=spec)
        def serve(self, INPUT, START, END, READY, CORRID, INPUT_STATE):  # noqa: N803 - the tensors' names
            total = INPUT_STATE * (1 - START) + INPUT
            return {
                "OUTPUT": total,
                "FLAGS": START + 2 * END + 4 * READY,
                "CORRID_OUT": tf.identity(CORRID),
                "OUTPUT_STATE": tf.identity(total),
            }

    module = SequenceSum()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})


def write_sequence_models(repo: Path, frameworks: list[str]) -> list[str]:
    """Every framework x batching x strategy; returns the model names."""
    names = []
    savedmodels: list[tuple[Path, bool]] = []
    for framework in frameworks:
        for batching in (True, False):
            for strategy in ("direct", "oldest"):
                name = f"{framework}_{strategy}_{'batching' if batching else 'single'}"
                body = "direct { }" if strategy == "direct" else "oldest { max_candidate_sequences: 4 }"
                version = repo / name / "1"
                version.mkdir(parents=True)
                if framework == "onnx":
                    (version / "model.onnx").write_bytes(onnx_model(batching))
                    text = config('platform: "onnxruntime_onnx"', batching, body, PLAIN_NAMES)
                elif framework == "pytorch":
                    save_torchscript(version / "model.pt")
                    text = config('platform: "pytorch_libtorch"', batching, body, TORCH_NAMES)
                else:
                    savedmodels.append((version / "model.savedmodel", batching))
                    text = config('platform: "tensorflow_savedmodel"', batching, body, PLAIN_NAMES)
                (repo / name / "config.pbtxt").write_text(text)
                names.append(name)
    if savedmodels:
        run_apart(save_savedmodels, savedmodels)
    return names
