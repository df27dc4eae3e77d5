"""The fuzz's cases, one hypothesis strategy per kind: each builds a valid request to one of
the fuzz's models and then breaks it (or, now and then, leaves it valid)."""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import numpy as np
from fuzz_models import BACKEND_NAMES, CONFIG_OVERRIDES, DATATYPES, PLATFORM_NAMES, FuzzModel, json_data, raw_bytes
from fuzz_mutations import encode, huge_numbers, json_values, mutate_bytes, mutate_document, texts
from hypothesis import strategies as st

from naiad.protos import grpc_service_pb2 as pb

# A registered system shared-memory region the valid requests may read an input from.
SHM_REGION = "fuzz_region"
SHM_SIZE = 4096


@dataclass
class HttpCase:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    # What was done to the valid request; () when it is still valid (then it must succeed).
    mutations: list[str] = field(default_factory=list)
    model: str = ""  # the model a load loads

    def __repr__(self) -> str:  # hypothesis prints the case when it fails: keep it readable
        body = self.body if len(self.body) <= 600 else self.body[:600] + b"...(%d bytes)" % len(self.body)
        return f"HttpCase({self.method} {self.path} headers={self.headers} mutations={self.mutations} body={body!r})"


@dataclass
class GrpcCase:
    method: str  # "ModelInfer", "ModelStreamInfer" or "RepositoryModelLoad"
    payloads: list[bytes]  # serialized messages (one, or the stream's)
    mutations: list[str] = field(default_factory=list)
    # Raw byte mutations make a message protobuf may not parse: INTERNAL, gRPC's status for it.
    raw: bool = False
    model: str = ""  # the model a load loads

    def __repr__(self) -> str:
        shown = [p if len(p) <= 400 else p[:400] + b"..." for p in self.payloads]
        return f"GrpcCase({self.method} raw={self.raw} mutations={self.mutations} payloads={shown!r})"


def _infer_path(draw: st.DrawFn, model: FuzzModel, mutations: list[str]) -> str:
    choice = draw(st.integers(0, 19))
    if choice == 0:
        name = draw(texts)
        mutations.append("model name")
        return f"/v2/models/{quote(name.encode('utf-8', 'surrogatepass'), safe='')}/infer"
    if choice == 1:
        version = draw(st.sampled_from(["1", "01", "2", "0", "99999999999999999999", "-1", "x"]))
        if version != "1":
            mutations.append(f"version {version}")
        return f"/v2/models/{model.name}/versions/{version}/infer"
    return f"/v2/models/{model.name}/infer"


def _rng(draw: st.DrawFn) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**16)))


def _batch(draw: st.DrawFn, model: FuzzModel) -> int:
    return draw(st.integers(1, model.largest_batch)) if model.max_batch_size else 1


def _outputs(draw: st.DrawFn, inputs: list[dict[str, Any]], binary: bool | None) -> list[dict[str, Any]] | None:
    """Requested outputs (None: all, the default): those of the inputs sent, which the
    identity models answer (an output a model leaves out is the model's failure)."""
    if draw(st.booleans()):
        return None
    names = [_output_name(i["name"]) for i in inputs]
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    outputs: list[dict[str, Any]] = []
    for name in chosen:
        entry: dict[str, Any] = {"name": name}
        if binary is not None:
            entry["parameters"] = {"binary_data": binary}
        outputs.append(entry)
    return outputs


def _output_name(input_name: str) -> str:
    if input_name.startswith("INPUT"):
        return "OUTPUT" + input_name[5:]
    if input_name.startswith("IN_"):
        return "OUT_" + input_name[3:]
    return "OUT_" + input_name


@st.composite
def http_json_infer(draw: st.DrawFn, models: list[FuzzModel]) -> HttpCase:
    """(1) A JSON infer body, structure-mutated, sometimes byte-mutated too."""
    model = draw(st.sampled_from(models))
    rng = _rng(draw)
    inputs = []
    for spec, shape, data in model.valid_inputs(rng, _batch(draw, model)):
        inputs.append(
            {"name": spec.name, "datatype": spec.datatype, "shape": list(shape), "data": json_data(spec.datatype, data)}
        )
    document: dict[str, Any] = {"id": draw(st.sampled_from(["", "fuzz", "x" * 64])), "inputs": inputs}
    if model.parameters:
        document["parameters"] = dict(model.parameters)
    if draw(st.booleans()):
        document.setdefault("parameters", {})["binary_data_output"] = draw(st.booleans())
    outputs = _outputs(draw, inputs, draw(st.sampled_from([None, True, False])))
    if outputs is not None:
        document["outputs"] = outputs
    mutations: list[str] = []
    path = _infer_path(draw, model, mutations)
    document, done = draw(mutate_document(document))
    mutations += done
    body = encode(document)
    if draw(st.integers(0, 7)) == 0:
        body = draw(mutate_bytes(body))
        mutations.append("bytes")
    headers = {"Content-Type": "application/json"}
    body, headers = _maybe_compressed(draw, body, headers, mutations)
    return HttpCase("POST", path, body, headers, mutations)


def _maybe_compressed(
    draw: st.DrawFn, body: bytes, headers: dict[str, str], mutations: list[str]
) -> tuple[bytes, dict[str, str]]:
    choice = draw(st.integers(0, 29))
    if choice == 0:
        headers["Content-Encoding"] = "gzip"
        return gzip.compress(body), headers
    if choice == 1:
        headers["Content-Encoding"] = draw(st.sampled_from(["gzip", "deflate", "br", "identity, gzip", "x"]))
        mutations.append(f"Content-Encoding {headers['Content-Encoding']} on a plain body")
        return body, headers
    if choice == 2:
        headers["Content-Encoding"] = "gzip"
        mutations.append("truncated gzip")
        compressed = gzip.compress(body)
        return compressed[: draw(st.integers(0, len(compressed) - 1))], headers
    return body, headers


HEADER_LENGTH_VALUES = [
    "",
    " ",
    "-1",
    "+5",
    "1_0",
    "0x10",
    "1e3",
    "99999999999999999999",
    "abc",
    "0 ",
    " 7",
    "٣".encode().decode("latin-1"),
]


@st.composite
def http_binary_infer(draw: st.DrawFn, models: list[FuzzModel]) -> HttpCase:
    """(2) A binary-tensor body: the JSON header, binary_data_size, the
    Inference-Header-Content-Length and the bytes after the header, each mutated."""
    model = draw(st.sampled_from(models))
    rng = _rng(draw)
    inputs, chunks = [], []
    for spec, shape, data in model.valid_inputs(rng, _batch(draw, model)):
        raw = raw_bytes(spec.datatype, data)
        entry: dict[str, Any] = {"name": spec.name, "datatype": spec.datatype, "shape": list(shape)}
        if draw(st.integers(0, 4)) == 0:
            entry["data"] = json_data(spec.datatype, data)  # JSON and binary inputs side by side
        else:
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        inputs.append(entry)
    document: dict[str, Any] = {"inputs": inputs, "parameters": dict(model.parameters)}
    outputs = _outputs(draw, inputs, draw(st.sampled_from([None, True])))
    if outputs is not None:
        document["outputs"] = outputs
    else:
        document["parameters"]["binary_data_output"] = True
    mutations: list[str] = []
    path = _infer_path(draw, model, mutations)
    document, done = draw(mutate_document(document, max_mutations=2))
    mutations += done
    header = encode(document)

    payload_op = draw(
        st.sampled_from(["keep"] * 4 + ["truncate", "extra", "swap", "corrupt", "random", "length_prefix"])
    )
    if payload_op == "truncate" and chunks:
        chunks[-1] = chunks[-1][: draw(st.integers(0, max(len(chunks[-1]) - 1, 0)))]
    elif payload_op == "extra":
        chunks.append(draw(st.binary(min_size=1, max_size=64)))
    elif payload_op == "swap" and len(chunks) > 1:
        chunks.reverse()
    elif payload_op == "corrupt" and chunks:
        index = draw(st.integers(0, len(chunks) - 1))
        chunks[index] = draw(mutate_bytes(chunks[index])) if chunks[index] else chunks[index]
    elif payload_op == "random":
        chunks = [draw(st.binary(max_size=256))]
    elif payload_op == "length_prefix":
        # A BYTES element whose 4-byte length says more (or less) than follows it.
        chunks.append(draw(st.sampled_from([2**32 - 1, 2**31, 5, 0])).to_bytes(4, "little") + b"abc")
    if payload_op != "keep":
        mutations.append(f"payload {payload_op}")
    payload = b"".join(chunks)

    header_length: str | None = str(len(header))
    length_op = draw(st.sampled_from(["keep"] * 6 + ["delta", "whole", "past", "absent", "text"]))
    if length_op == "delta":
        header_length = str(len(header) + draw(st.integers(-8, 8).filter(bool)))
    elif length_op == "whole":
        header_length = str(len(header) + len(payload))
    elif length_op == "past":
        header_length = str(len(header) + len(payload) + draw(st.integers(1, 2**40)))
    elif length_op == "absent":
        header_length = None
    elif length_op == "text":
        header_length = draw(st.sampled_from(HEADER_LENGTH_VALUES))
    if length_op != "keep":
        mutations.append(f"Inference-Header-Content-Length {length_op} ({header_length!r})")
    headers = {"Content-Type": "application/octet-stream"}
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = header_length
    body = header + payload
    if draw(st.integers(0, 9)) == 0:
        body = draw(mutate_bytes(body))
        mutations.append("bytes")
    return HttpCase("POST", path, body, headers, mutations)


@st.composite
def http_raw_infer(draw: st.DrawFn, models: list[FuzzModel]) -> HttpCase:
    """(2) A raw binary request (Inference-Header-Content-Length: 0): the whole body is the
    one input's data; models with more inputs refuse it."""
    model = draw(st.sampled_from(models))
    mutations: list[str] = []
    if len(model.inputs) != 1:
        mutations.append(f"raw request to a model with {len(model.inputs)} inputs")
    if model.parameters:
        mutations.append("raw request without the parameters the model needs")
    spec, _, data = model.valid_inputs(_rng(draw))[0]
    # A BYTES input's raw body is the one element itself, not its length-prefixed form.
    body = data.reshape(-1)[0] if spec.datatype == "BYTES" else raw_bytes(spec.datatype, data)
    if draw(st.integers(0, 2)) == 0:
        body = draw(st.binary(max_size=64))
        mutations.append("random body")
    return HttpCase("POST", f"/v2/models/{model.name}/infer", body, {"Inference-Header-Content-Length": "0"}, mutations)


def _target(draw: st.DrawFn, targets: list[str]) -> str:
    # Mostly the numpy model: an ONNX session or a Python stub costs more to load.
    return draw(st.sampled_from(["np_cfg"] * 6 + targets))


@st.composite
def _override_document(draw: st.DrawFn, model: str) -> tuple[Any, list[str]]:
    document, mutations = draw(mutate_document(CONFIG_OVERRIDES[model], max_mutations=3))
    if isinstance(document, dict) and draw(st.integers(0, 5)) == 0:
        # Another backend (or platform) for the same model directory and files.
        key, names = draw(st.sampled_from([("backend", BACKEND_NAMES), ("platform", PLATFORM_NAMES)]))
        document[key] = draw(st.sampled_from(names))
        mutations.append(f"{key} {document[key]!r}")
    return document, mutations


@st.composite
def config_override(draw: st.DrawFn, targets: list[str]) -> HttpCase:
    """(3) A load with a config override in Triton's JSON form, mutated: as the JSON text
    tritonclient sends, now and then byte-mutated, or as the object naiad also takes."""
    model = _target(draw, targets)
    document, mutations = draw(_override_document(model))
    carrier = draw(st.sampled_from(["text"] * 3 + ["object", "outer"]))
    config: Any
    if carrier == "object":
        config = document
    else:
        text = encode(document)
        if draw(st.integers(0, 5)) == 0:
            text = draw(mutate_bytes(text))
            mutations.append("bytes")
        config = text.decode("utf-8", "replace")
    parameters: Any = {"config": config}
    if draw(st.integers(0, 9)) == 0:
        # A model file sent with the config: the server writes it in a fresh directory of its own.
        name = draw(st.sampled_from(["1/model.onnx", "../x", "/abs", "1/../../y", "1/ok.txt", "", "1/"]))
        parameters[f"file:{name}"] = draw(st.sampled_from([base64.b64encode(b"x").decode(), "not base64!", 7]))
        mutations.append(f"file:{name}")
    outer: Any = {"parameters": parameters}
    if carrier == "outer":
        outer, done = draw(mutate_document(outer, max_mutations=2))
        mutations += [f"outer {d}" for d in done]
    return HttpCase("POST", f"/v2/repository/models/{model}/load", encode(outer), {}, mutations, model)


# -- gRPC -------------------------------------------------------------------------------

_TYPED_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}

# Protobuf strings must be UTF-8: the text of a message field leaves out lone surrogates (raw
# byte mutations reach invalid UTF-8 instead).
proto_texts = texts.filter(lambda t: not any("\ud800" <= c <= "\udfff" for c in t))

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
_PARAMETER_KEYS = st.one_of(
    proto_texts,
    st.sampled_from(
        [
            "sequence_id",
            "sequence_start",
            "sequence_end",
            "priority",
            "timeout",
            "binary_data_output",
            "binary_data",
            "classification",
            "shared_memory_region",
            "shared_memory_offset",
            "shared_memory_byte_size",
            "triton_enable_empty_final_response",
            "binary_data_size",
        ]
    ),
)


@st.composite
def _parameter(draw: st.DrawFn, target: Any) -> str:
    key = draw(_PARAMETER_KEYS)
    kind = draw(st.sampled_from(["bool_param", "int64_param", "string_param", "double_param", "uint64_param"]))
    value: Any = {
        "bool_param": st.booleans(),
        "int64_param": st.one_of(_INT64, st.sampled_from([-1, 0, 1, 2**63 - 1])),
        "string_param": proto_texts,
        "double_param": st.floats(),
        "uint64_param": st.one_of(_UINT64, st.sampled_from([0, 1, 2**64 - 1])),
    }[kind]
    setattr(target[key], kind, draw(value))
    return f"parameter {key!r} {kind}"


def valid_grpc_request(
    model: FuzzModel, rng: np.random.Generator, batch: int, typed: bool, shm_input: bool
) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name=model.name, id="fuzz")
    for key, value in model.parameters.items():
        kind = "bool_param" if isinstance(value, bool) else "int64_param" if isinstance(value, int) else "string_param"
        setattr(message.parameters[key], kind, value)
    inputs = model.valid_inputs(rng, batch)
    typed = typed and all(spec.datatype in _TYPED_FIELD for spec, _, _ in inputs)
    for index, (spec, shape, data) in enumerate(inputs):
        tensor = message.inputs.add(name=spec.name, datatype=spec.datatype, shape=shape)
        raw = raw_bytes(spec.datatype, data)
        if shm_input and index == 0 and not typed and len(raw) <= SHM_SIZE:
            # Read from the region the fixture registered: the bytes there are not this
            # input's, but any bytes of the right size are valid data.
            tensor.parameters["shared_memory_region"].string_param = SHM_REGION
            tensor.parameters["shared_memory_byte_size"].int64_param = len(raw)
            if spec.datatype == "BYTES":  # the region holds zeros: a run of empty elements
                tensor.parameters["shared_memory_byte_size"].int64_param = 4 * int(np.prod(shape))
        elif typed:
            values = getattr(tensor.contents, _TYPED_FIELD[spec.datatype])
            values.extend(list(data.reshape(-1)) if spec.datatype == "BYTES" else data.reshape(-1).tolist())
        else:
            message.raw_input_contents.append(raw)
    return message


GRPC_MUTATIONS = (
    "model_name",
    "model_version",
    "id",
    "drop_input",
    "duplicate_input",
    "input_name",
    "datatype",
    "shape",
    "input_parameter",
    "contents",
    "drop_raw",
    "duplicate_raw",
    "truncate_raw",
    "extend_raw",
    "random_raw",
    "request_parameter",
    "output",
    "output_parameter",
)


@st.composite
def _mutate_grpc(draw: st.DrawFn, message: pb.ModelInferRequest) -> list[str]:
    done: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(GRPC_MUTATIONS))
        inputs, raw = message.inputs, message.raw_input_contents
        which = draw(st.integers(0, 7))
        if kind == "model_name":
            message.model_name = draw(proto_texts)
        elif kind == "model_version":
            message.model_version = draw(
                st.one_of(proto_texts, st.sampled_from(["1", "2", "0", "-1", "01", "1.0", "18446744073709551616"]))
            )
        elif kind == "id":
            message.id = draw(proto_texts)
        elif kind == "drop_input" and inputs:
            del inputs[which % len(inputs)]
        elif kind == "duplicate_input" and inputs:
            inputs.add().CopyFrom(inputs[which % len(inputs)])
        elif kind == "input_name" and inputs:
            inputs[which % len(inputs)].name = draw(proto_texts)
        elif kind == "datatype" and inputs:
            inputs[which % len(inputs)].datatype = draw(st.one_of(st.sampled_from(DATATYPES), proto_texts))
        elif kind == "shape" and inputs:
            shape = draw(
                st.one_of(
                    st.lists(st.one_of(st.integers(-2, 6), _INT64, st.sampled_from([2**31, 2**62])), max_size=5),
                    # Ranks no tensor has: no elements at all, or one each.
                    st.sampled_from([[0] * 100, [1] * 33, [2**31, 2**31, 2**31]]),
                )
            )
            tensor = inputs[which % len(inputs)]
            del tensor.shape[:]
            tensor.shape.extend(shape)
        elif kind == "input_parameter" and inputs:
            done.append(draw(_parameter(inputs[which % len(inputs)].parameters)))
        elif kind == "contents" and inputs:
            field_name = draw(st.sampled_from(sorted(set(_TYPED_FIELD.values()))))
            values = getattr(inputs[which % len(inputs)].contents, field_name)
            element = {
                "bool_contents": st.booleans(),
                "int_contents": st.integers(-(2**31), 2**31 - 1),
                "int64_contents": _INT64,
                "uint_contents": st.integers(0, 2**32 - 1),
                "uint64_contents": _UINT64,
                "fp32_contents": st.floats(width=32),
                "fp64_contents": st.floats(),
                "bytes_contents": st.binary(max_size=16),
            }[field_name]
            values.extend(draw(st.lists(element, max_size=12)))
        elif kind == "drop_raw" and raw:
            del raw[which % len(raw)]
        elif kind == "duplicate_raw" and raw:
            raw.append(raw[which % len(raw)])
        elif kind == "truncate_raw" and raw:
            index = which % len(raw)
            raw[index] = raw[index][: draw(st.integers(0, max(len(raw[index]) - 1, 0)))]
        elif kind == "extend_raw" and raw:
            index = which % len(raw)
            raw[index] = raw[index] + draw(st.binary(min_size=1, max_size=16))
        elif kind == "random_raw":
            raw.append(draw(st.binary(max_size=64)))
        elif kind == "request_parameter":
            done.append(draw(_parameter(message.parameters)))
            continue
        elif kind == "output":
            message.outputs.add(name=draw(st.one_of(proto_texts, st.sampled_from(["OUTPUT0", "OUT_TEXT", "OUT_FP32"]))))
        elif kind == "output_parameter":
            if not message.outputs:
                message.outputs.add(name="OUTPUT0")
            done.append(draw(_parameter(message.outputs[which % len(message.outputs)].parameters)))
            continue
        else:
            continue
        done.append(kind)
    return done


@st.composite
def _grpc_message(draw: st.DrawFn, models: list[FuzzModel]) -> tuple[bytes, list[str], bool]:
    model = draw(st.sampled_from(models))
    message = valid_grpc_request(
        model, _rng(draw), _batch(draw, model), typed=draw(st.booleans()), shm_input=draw(st.integers(0, 5)) == 0
    )
    mutations = draw(_mutate_grpc(message))
    payload = message.SerializeToString()
    raw = False
    if draw(st.integers(0, 9)) == 0:
        payload = draw(mutate_bytes(payload))
        mutations.append("bytes")
        raw = True
    return payload, mutations, raw


@st.composite
def grpc_infer(draw: st.DrawFn, models: list[FuzzModel]) -> GrpcCase:
    """(4) A ModelInferRequest with mutated fields (or, now and then, mutated bytes)."""
    payload, mutations, raw = draw(_grpc_message(models))
    return GrpcCase("ModelInfer", [payload], mutations, raw)


@st.composite
def grpc_stream(draw: st.DrawFn, models: list[FuzzModel]) -> GrpcCase:
    """(4) Mutated ModelInferRequests on one ModelStreamInfer stream: every error comes back
    in the stream, which stays open for the next request."""
    messages = draw(st.lists(_grpc_message(models).filter(lambda m: not m[2]), min_size=1, max_size=4))
    return GrpcCase(
        "ModelStreamInfer", [m[0] for m in messages], [f"[{i}] {', '.join(m[1])}" for i, m in enumerate(messages)]
    )


@st.composite
def grpc_config_override(draw: st.DrawFn, targets: list[str]) -> GrpcCase:
    """(3) over gRPC: RepositoryModelLoad with a mutated `config` string parameter."""
    model = _target(draw, targets)
    document, mutations = draw(_override_document(model))
    text = encode(document).decode("utf-8", "replace")
    message = pb.RepositoryModelLoadRequest(model_name=model)
    message.parameters["config"].string_param = text
    if draw(st.integers(0, 5)) == 0:
        key = draw(st.sampled_from(["config", "file:1/model.onnx", "file:../x", "other"]))
        kind = draw(st.sampled_from(["bool_param", "int64_param", "string_param", "bytes_param"]))
        value = {"bool_param": True, "int64_param": -1, "string_param": "{}", "bytes_param": b"\x00\xff"}[kind]
        setattr(message.parameters[key], kind, value)
        mutations.append(f"parameter {key} {kind}")
    return GrpcCase("RepositoryModelLoad", [message.SerializeToString()], mutations, model=model)


__all__ = [
    "HttpCase",
    "GrpcCase",
    "SHM_REGION",
    "SHM_SIZE",
    "http_json_infer",
    "http_binary_infer",
    "http_raw_infer",
    "config_override",
    "grpc_infer",
    "grpc_stream",
    "grpc_config_override",
    "valid_grpc_request",
    "huge_numbers",
    "json_values",
]
