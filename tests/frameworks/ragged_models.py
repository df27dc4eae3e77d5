"""One ragged-batch model in every framework, built at test time.

The input INPUT (FP32, `allow_ragged_batch`) reaches the model as the requests' elements
concatenated into one flat tensor, with a `batch_input` of every kind describing it. The
model answers, per request (shape [1] each, batch dimension in front):

    SUM    the sum of the request's own elements (cut out of the flat tensor with the
           BATCH_ACCUMULATED_ELEMENT_COUNT[_WITH_ZERO] offsets)
    COUNT  BATCH_ELEMENT_COUNT                         its element count
    START  BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO   where its elements start (all but the last)
    END    BATCH_ACCUMULATED_ELEMENT_COUNT             where they end
    MAX    BATCH_MAX_ELEMENT_COUNT_AS_SHAPE            the batch's largest count (the tensor's length)
    ITEM   BATCH_ITEM_SHAPE                            its shape without the batch dimension ([n])
    FLAT   BATCH_ITEM_SHAPE_FLATTEN                    the same, from the flattened form
"""

from __future__ import annotations

from pathlib import Path

from apart import run_apart

BATCH_INPUTS = (
    ("COUNT_IN", "BATCH_ELEMENT_COUNT"),
    ("END_IN", "BATCH_ACCUMULATED_ELEMENT_COUNT"),
    ("START_IN", "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"),
    ("MAX_IN", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"),
    ("ITEM_IN", "BATCH_ITEM_SHAPE"),
    ("FLAT_IN", "BATCH_ITEM_SHAPE_FLATTEN"),
)
OUTPUTS = (
    ("SUM", "TYPE_FP32"),
    ("COUNT", "TYPE_INT32"),
    ("START", "TYPE_INT32"),
    ("END", "TYPE_INT32"),
    ("MAX", "TYPE_INT64"),
    ("ITEM", "TYPE_INT32"),
    ("FLAT", "TYPE_INT32"),
)


def config(platform: str, batch_size: int) -> str:
    batch_inputs = ",\n  ".join(
        f'{{kind: {kind} target_name: "{target}" data_type: TYPE_INT32 source_input: "INPUT"}}'
        for target, kind in BATCH_INPUTS
    )
    outputs = ", ".join(f'{{name: "{name}" data_type: {dtype} dims: [1]}}' for name, dtype in OUTPUTS)
    return f"""{platform}
max_batch_size: 8
input [{{name: "INPUT" data_type: TYPE_FP32 dims: [-1] allow_ragged_batch: true}}]
batch_input [
  {batch_inputs}
]
output [{outputs}]
dynamic_batching {{ preferred_batch_size: [{batch_size}] max_queue_delay_microseconds: 10000000 }}
"""


def onnx_model() -> bytes:
    from onnx import TensorProto, helper

    def info(name: str, elem_type: int, shape: list) -> object:
        return helper.make_tensor_value_info(name, elem_type, shape)

    def const(name: str, values: list[int]) -> object:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values)
        )

    nodes = [
        const("first", [0]),
        const("last", [-1]),
        const("column", [-1, 1]),
        helper.make_node("Constant", [], ["axis0"], value=helper.make_tensor("axis0", TensorProto.INT32, [], [0])),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])),
        # Running totals with a 0 in front: a request's sum is totals[end] - totals[start].
        helper.make_node("CumSum", ["INPUT", "axis0"], ["running"]),
        helper.make_node("Concat", ["zero", "running"], ["totals"], axis=0),
        helper.make_node("Slice", ["START_IN", "first", "last"], ["starts"]),
        helper.make_node("Gather", ["totals", "END_IN"], ["at_end"]),
        helper.make_node("Gather", ["totals", "starts"], ["at_start"]),
        helper.make_node("Sub", ["at_end", "at_start"], ["sums"]),
        helper.make_node("Reshape", ["sums", "column"], ["SUM"]),
        helper.make_node("Reshape", ["COUNT_IN", "column"], ["COUNT"]),
        helper.make_node("Reshape", ["starts", "column"], ["START"]),
        helper.make_node("Reshape", ["END_IN", "column"], ["END"]),
        helper.make_node("Shape", ["MAX_IN"], ["max_shape"]),
        helper.make_node("Shape", ["COUNT"], ["rows"]),
        helper.make_node("Expand", ["max_shape", "rows"], ["MAX"]),
        helper.make_node("Identity", ["ITEM_IN"], ["ITEM"]),
        helper.make_node("Reshape", ["FLAT_IN", "column"], ["FLAT"]),
    ]
    inputs = [info("INPUT", TensorProto.FLOAT, ["elements"])]
    inputs += [info(name, TensorProto.INT32, ["n", 1] if name == "ITEM_IN" else ["n"]) for name, _ in BATCH_INPUTS]
    elem = {"TYPE_FP32": TensorProto.FLOAT, "TYPE_INT32": TensorProto.INT32, "TYPE_INT64": TensorProto.INT64}
    outputs = [info(name, elem[dtype], ["batch", 1]) for name, dtype in OUTPUTS]
    graph = helper.make_graph(nodes, "ragged", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return model.SerializeToString()


def save_torchscript(path: Path) -> None:

    import torch

    class Ragged(torch.nn.Module):
        def forward(
            self,
            INPUT: torch.Tensor,
            COUNT_IN: torch.Tensor,
            END_IN: torch.Tensor,  # noqa: N803
            START_IN: torch.Tensor,
            MAX_IN: torch.Tensor,
            ITEM_IN: torch.Tensor,
            FLAT_IN: torch.Tensor,
        ) -> dict[str, torch.Tensor]:
            totals = torch.cat([torch.zeros(1), torch.cumsum(INPUT, 0)])
            starts = START_IN[:-1]
            sums = totals[END_IN.long()] - totals[starts.long()]
            rows = COUNT_IN.shape[0]
            return {
                "SUM": sums.reshape(-1, 1),
                "COUNT": COUNT_IN.reshape(-1, 1),
                "START": starts.reshape(-1, 1),
                "END": END_IN.reshape(-1, 1),
                "MAX": torch.full([rows, 1], MAX_IN.shape[0], dtype=torch.int64),
                "ITEM": ITEM_IN,
                "FLAT": FLAT_IN.reshape(-1, 1),
            }

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.save(torch.jit.script(Ragged().eval()), str(path))


def save_savedmodel(directory: Path) -> None:
    import tensorflow as tf

    spec = [tf.TensorSpec([None], tf.float32, name="INPUT")]
    spec += [tf.TensorSpec([None, 1] if name == "ITEM_IN" else [None], tf.int32, name=name) for name, _ in BATCH_INPUTS]

    class Ragged(tf.Module):
        @tf.function(input_signature=spec)
        def serve(self, INPUT, COUNT_IN, END_IN, START_IN, MAX_IN, ITEM_IN, FLAT_IN):  # noqa: N803
            totals = tf.concat([tf.zeros([1]), tf.cumsum(INPUT)], 0)
            starts = START_IN[:-1]
            sums = tf.gather(totals, END_IN) - tf.gather(totals, starts)
            rows = tf.shape(COUNT_IN)[0]
            return {
                "SUM": tf.reshape(sums, [-1, 1]),
                "COUNT": tf.reshape(COUNT_IN, [-1, 1]),
                "START": tf.reshape(starts, [-1, 1]),
                "END": tf.reshape(END_IN, [-1, 1]),
                "MAX": tf.fill([rows, 1], tf.shape(MAX_IN, out_type=tf.int64)[0]),
                "ITEM": tf.identity(ITEM_IN),
                "FLAT": tf.reshape(FLAT_IN, [-1, 1]),
            }

    module = Ragged()
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})


def write_ragged_models(repo: Path, frameworks: list[str], batch_size: int) -> list[str]:
    names = []
    for framework in frameworks:
        name = f"{framework}_ragged"
        version = repo / name / "1"
        version.mkdir(parents=True)
        if framework == "onnx":
            (version / "model.onnx").write_bytes(onnx_model())
            text = config('platform: "onnxruntime_onnx"', batch_size)
        elif framework == "pytorch":
            save_torchscript(version / "model.pt")
            text = config('platform: "pytorch_libtorch"', batch_size)
        else:
            run_apart(save_savedmodel, version / "model.savedmodel")
            text = config('platform: "tensorflow_savedmodel"', batch_size)
        (repo / name / "config.pbtxt").write_text(text)
        names.append(name)
    return names
