"""`naiad infer MODEL --input NAME=VALUE ...`: one inference request to a running server
(naiad or Triton), its outputs printed."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...option_fields import option
from ..client_flags import ClientFlags
from ..command import Command
from ..flags import add_option_flags, options_from_flags
from ..infer_inputs import request_inputs, split_input_flag
from ..kserve_client import ClientError

__all__ = ["COMMAND"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InferFlags:
    input: tuple[str, ...] = option(
        (),
        "--input",
        "one input: a .npy file, or its values as JSON (e.g. INPUT0=[[1,2],[3,4]]; a value one "
        "dimension short of the model's shape is a batch of one). Repeat for each input",
        aliases=("-i",),
        metavar="NAME=FILE.npy|JSON",
    )
    output: tuple[str, ...] = option(
        (), "--output", "print only this output (repeatable; default every output)", aliases=("-o",), metavar="NAME"
    )
    model_version: str = option("", "--model-version", "the version to ask (default: the server's choice)", metavar="N")
    json: bool = option(False, "--json", "print the server's JSON response as it came", switch=True, shown="")


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="the model to ask")
    add_option_flags(parser.add_argument_group("request"), InferFlags)
    add_option_flags(parser.add_argument_group("server"), ClientFlags)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    flags = options_from_flags(InferFlags, args)
    client = options_from_flags(ClientFlags, args).client()
    model: str = args.model
    try:
        values = [split_input_flag(text) for text in flags.input]
    except ValueError as exc:
        parser.error(str(exc))
    try:
        metadata = client.model_metadata(model, flags.model_version)
        body: dict[str, Any] = {"inputs": request_inputs(model, metadata, values)}
        if flags.output:
            body["outputs"] = [{"name": name} for name in flags.output]
        response = client.infer(model, body, flags.model_version)
    except (ClientError, ValueError) as exc:
        print(f"error: {exc.message if isinstance(exc, ClientError) else exc}", file=sys.stderr)
        return 1
    if flags.json:
        print(json.dumps(response, indent=2))
        return 0
    for output in response.get("outputs", []):
        print(_describe(output))
    return 0


def _describe(output: dict[str, Any]) -> str:
    """`NAME DATATYPE [shape]`, then the values laid out as numpy prints an array."""
    shape = [int(d) for d in output.get("shape", [])]
    datatype = output.get("datatype", "")
    data = output.get("data", [])
    array = np.array(data, dtype=object if datatype == "BYTES" else None).reshape(shape)
    with np.printoptions(threshold=1000, linewidth=100):
        return f"{output['name']} {datatype} {shape}\n{array}"


COMMAND = Command(
    name="infer",
    help="send one inference request to a running server and print its outputs",
    description=(
        "Send one inference request to a running server (naiad or Triton, over KServe v2 HTTP/REST) "
        "and print its outputs. Each input's datatype comes from the model's metadata."
    ),
    add_flags=add_flags,
    run=run,
    order=20,
)
