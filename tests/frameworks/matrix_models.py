"""The inference matrix's models, built at test time: for every datatype, with and without
a batch dimension, one ONNX model, one TorchScript model, a Python model (one per
batching mode, taking every datatype through optional inputs), and an ensemble that fans
out to all three at once.

Each model answers OUTPUT0 = op0(INPUT0, INPUT1) and OUTPUT1 = op1(INPUT0, INPUT1):
sum and difference for numbers, OR and XOR for BOOL, the inputs themselves for BYTES
(and for the unsigned types torch stores but cannot add). OUTPUT0 of numeric models has a
label file of its own per framework ("onnx0".., "pytorch0".., "python0"..), so
classification shows whose labels it used.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATATYPES = (
    "BOOL",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
)
NUMPY = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
# torch keeps these as storage types without arithmetic ("add_stub" not implemented).
TORCH_WITHOUT_ARITHMETIC = ("UINT16", "UINT32", "UINT64")
LABELS = 4


def config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


def dims(datatype: str) -> list[int]:
    # TorchScript takes strings only as a flat List[str]: one string per batch item.
    return [1] if datatype == "BYTES" else [LABELS]


def numeric(datatype: str) -> bool:
    return datatype not in ("BOOL", "BYTES")


def op_kind(framework: str, datatype: str) -> str:
    if datatype == "BOOL":
        return "logic"
    if datatype == "BYTES" or (framework == "pytorch" and datatype in TORCH_WITHOUT_ARITHMETIC):
        return "identity"
    return "add_sub"


def expected(kind: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if kind == "logic":
        return a | b, a ^ b
    if kind == "identity":
        return a, b
    return a + b, a - b


@dataclass(frozen=True)
class Output:
    name: str
    role: int  # 0: OUTPUT0's value, 1: OUTPUT1's
    kind: str  # op_kind of the model that computes it
    labels: str | None  # label prefix, for outputs with a label file


@dataclass(frozen=True)
class Target:
    """A model of the matrix as a client sees it."""

    model: str
    inputs: tuple[str, str]
    outputs: tuple[Output, ...]


def name(framework: str, datatype: str, batching: bool) -> str:
    return f"{framework}_{datatype.lower()}_{'batch' if batching else 'single'}"


def targets(frameworks: list[str], datatype: str, batching: bool) -> dict[str, Target]:
    """The targets of one datatype and batching mode, by kind (framework or "ensemble")."""
    found: dict[str, Target] = {}
    fanned: list[Output] = []
    for framework in frameworks:
        kind = op_kind(framework, datatype)
        labels = framework if numeric(datatype) else None
        if framework == "onnx":
            inputs, outs = ("INPUT0", "INPUT1"), ("OUTPUT0", "OUTPUT1")
        elif framework == "pytorch":
            inputs, outs = ("INPUT__0", "INPUT__1"), ("OUTPUT__0", "OUTPUT__1")
        else:
            inputs, outs = (f"INPUT0_{datatype}", f"INPUT1_{datatype}"), (f"OUTPUT0_{datatype}", f"OUTPUT1_{datatype}")
        model = (
            name(framework, datatype, batching)
            if framework != "python"
            else f"python_{'batch' if batching else 'single'}"
        )
        found[framework] = Target(model, inputs, (Output(outs[0], 0, kind, labels), Output(outs[1], 1, kind, None)))
        prefix = framework.upper()
        fanned += [Output(f"{prefix}_OUTPUT0", 0, kind, labels), Output(f"{prefix}_OUTPUT1", 1, kind, None)]
    if frameworks:
        found["ensemble"] = Target(name("ensemble", datatype, batching), ("INPUT0", "INPUT1"), tuple(fanned))
    return found


# -- writing the repository ----------------------------------------------------------------------


def _tensors(names: tuple[str, ...], datatype: str, labelled: str | None = None, optional: bool = False) -> str:
    items = []
    for index, tensor in enumerate(names):
        extra = ' label_filename: "labels.txt"' if labelled and index == 0 else ""
        extra += " optional: true" if optional else ""
        items.append(f'{{name: "{tensor}" data_type: {config_type(datatype)} dims: {dims(datatype)}{extra}}}')
    return ", ".join(items)


def _write(repo: Path, model: str, config: str, labels: str | None) -> Path:
    version = repo / model / "1"
    version.mkdir(parents=True)
    (repo / model / "config.pbtxt").write_text(config)
    if labels:
        (repo / model / "labels.txt").write_text("".join(f"{labels}{i}\n" for i in range(LABELS)))
    return version


def _onnx(datatype: str, batching: bool, kind: str) -> bytes:
    from onnx import TensorProto, helper

    elem = {
        "BOOL": TensorProto.BOOL,
        "INT8": TensorProto.INT8,
        "INT16": TensorProto.INT16,
        "INT32": TensorProto.INT32,
        "INT64": TensorProto.INT64,
        "UINT8": TensorProto.UINT8,
        "UINT16": TensorProto.UINT16,
        "UINT32": TensorProto.UINT32,
        "UINT64": TensorProto.UINT64,
        "FP16": TensorProto.FLOAT16,
        "FP32": TensorProto.FLOAT,
        "FP64": TensorProto.DOUBLE,
        "BYTES": TensorProto.STRING,
    }[datatype]
    shape = (["batch"] if batching else []) + dims(datatype)
    ops = {"add_sub": ("Add", "Sub"), "logic": ("Or", "Xor"), "identity": None}[kind]
    if ops is None:
        nodes = [
            helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"]),
            helper.make_node("Identity", ["INPUT1"], ["OUTPUT1"]),
        ]
    else:
        nodes = [
            helper.make_node(ops[0], ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node(ops[1], ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ]
    graph = helper.make_graph(
        nodes,
        "matrix",
        [helper.make_tensor_value_info(n, elem, shape) for n in ("INPUT0", "INPUT1")],
        [helper.make_tensor_value_info(n, elem, shape) for n in ("OUTPUT0", "OUTPUT1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return model.SerializeToString()


def _torch_modules() -> dict[str, Callable[[], object]]:

    import torch

    class AddSub(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a + b, a - b

    class Logic(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a | b, a ^ b

    class Identity(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a.clone(), b.clone()

    class Strings(torch.nn.Module):
        def forward(self, a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
            return a, b

    return {"add_sub": AddSub, "logic": Logic, "identity": Identity, "strings": Strings}


PYTHON_MODEL = textwrap.dedent('''
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        """Every datatype through optional inputs INPUT0_<T>, INPUT1_<T>."""

        def initialize(self, args):
            config = json.loads(args["model_config"])
            self.types = [i["name"][len("INPUT0_"):] for i in config["input"] if i["name"].startswith("INPUT0_")]

        def execute(self, requests):
            responses = []
            for request in requests:
                outputs = []
                for kind in self.types:
                    a = pb_utils.get_input_tensor_by_name(request, "INPUT0_" + kind)
                    if a is None:
                        continue
                    a = a.as_numpy()
                    b = pb_utils.get_input_tensor_by_name(request, "INPUT1_" + kind).as_numpy()
                    if a.dtype == np.bool_:
                        first, second = a | b, a ^ b
                    elif a.dtype == np.object_:
                        first, second = a, b
                    else:
                        first, second = a + b, a - b
                    outputs.append(pb_utils.Tensor("OUTPUT0_" + kind, first))
                    outputs.append(pb_utils.Tensor("OUTPUT1_" + kind, second))
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            return responses
''')


def write_matrix(repo: Path, frameworks: list[str]) -> list[str]:
    """Every model of the matrix; returns the model names."""
    written = []
    modules = _torch_modules() if "pytorch" in frameworks else {}
    for batching in (True, False):
        max_batch = 8 if batching else 0
        if "python" in frameworks:
            model = f"python_{'batch' if batching else 'single'}"
            inputs = ", ".join(_tensors((f"INPUT0_{d}", f"INPUT1_{d}"), d, optional=True) for d in DATATYPES)
            outputs = ", ".join(
                _tensors((f"OUTPUT0_{d}", f"OUTPUT1_{d}"), d, "python" if numeric(d) else None) for d in DATATYPES
            )
            # One label file serves every labelled output: their classes have the same names.
            config = f'backend: "python" max_batch_size: {max_batch}\ninput [{inputs}]\noutput [{outputs}]\n' + (
                "dynamic_batching { }\n" if batching else ""
            )
            version = _write(repo, model, config, "python")
            (version / "model.py").write_text(PYTHON_MODEL)
            written.append(model)
        for datatype in DATATYPES:
            labels = numeric(datatype)
            steps = []
            for framework in frameworks:
                kind = op_kind(framework, datatype)
                model = name(framework, datatype, batching)
                if framework == "onnx":
                    ins, outs, header = ("INPUT0", "INPUT1"), ("OUTPUT0", "OUTPUT1"), 'platform: "onnxruntime_onnx"'
                elif framework == "pytorch":
                    ins, outs, header = (
                        ("INPUT__0", "INPUT__1"),
                        ("OUTPUT__0", "OUTPUT__1"),
                        'platform: "pytorch_libtorch"',
                    )
                else:
                    ins, outs = (
                        (f"INPUT0_{datatype}", f"INPUT1_{datatype}"),
                        (f"OUTPUT0_{datatype}", f"OUTPUT1_{datatype}"),
                    )
                    model = f"python_{'batch' if batching else 'single'}"
                if framework != "python":
                    config = (
                        f"{header}\nmax_batch_size: {max_batch}\ninput [{_tensors(ins, datatype)}]\n"
                        f"output [{_tensors(outs, datatype, framework if labels else None)}]\n"
                        + ("dynamic_batching { }\n" if batching else "")
                    )
                    version = _write(repo, model, config, framework if labels else None)
                    if framework == "onnx":
                        (version / "model.onnx").write_bytes(_onnx(datatype, batching, kind))
                    else:
                        import torch

                        module = modules["strings" if datatype == "BYTES" else kind]()
                        torch.jit.save(torch.jit.script(module.eval()), str(version / "model.pt"))
                    written.append(model)
                prefix = framework.upper()
                maps = {ins[0]: "INPUT0", ins[1]: "INPUT1"}
                produced = {outs[0]: f"{prefix}_OUTPUT0", outs[1]: f"{prefix}_OUTPUT1"}
                steps.append(
                    "{ model_name: "
                    + json.dumps(model)
                    + " model_version: -1"
                    + "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in maps.items())
                    + "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in produced.items())
                    + " }"
                )
            if frameworks:
                ensemble = name("ensemble", datatype, batching)
                outputs = ", ".join(
                    _tensors((f"{f.upper()}_OUTPUT0", f"{f.upper()}_OUTPUT1"), datatype) for f in frameworks
                )
                config = (
                    f'platform: "ensemble"\nmax_batch_size: {max_batch}\n'
                    f"input [{_tensors(('INPUT0', 'INPUT1'), datatype)}]\noutput [{outputs}]\n"
                    f"ensemble_scheduling {{ step [ {', '.join(steps)} ] }}\n"
                )
                _write(repo, ensemble, config, None)
                written.append(ensemble)
    return written
