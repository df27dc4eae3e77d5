"""`HttpRequestEncoder`: whole HTTP/1.1 infer requests, encoded before the step starts:
binary tensors (Triton's binary-tensor extension) or JSON, inputs in the body or in
shared memory. Only a sequence model's requests differ one from the next (their sequence
parameters), and only their JSON header is encoded again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .http_control import model_path
from .input_tensors import InputTensor
from .sequence_flags import SequenceFlags
from .system_shm import Placement

__all__ = ["HttpRequestEncoder"]


class HttpRequestEncoder:
    def __init__(
        self,
        host: str,
        model: str,
        version: str,
        inputs: Sequence[InputTensor],
        outputs: Sequence[str],
        binary: bool,
        binary_output: bool,
        input_placement: Mapping[str, Placement] | None = None,
        output_placement: Mapping[str, Placement] | None = None,
    ) -> None:
        self._start = f"POST {model_path(model, version)}/infer HTTP/1.1\r\nHost: {host}\r\n".encode()
        header_inputs: list[dict[str, Any]] = []
        raws: list[bytes] = []
        for tensor in inputs:
            entry: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
            if input_placement is not None:
                entry["parameters"] = _shm_parameters(input_placement[tensor.name])
            elif binary:
                raw = tensor.raw()
                entry["parameters"] = {"binary_data_size": len(raw)}
                raws.append(raw)
            else:
                entry["data"] = tensor.json_data()
            header_inputs.append(entry)
        header_outputs: list[dict[str, Any]] = []
        for name in outputs:
            if output_placement is not None:
                header_outputs.append({"name": name, "parameters": _shm_parameters(output_placement[name])})
            else:
                header_outputs.append({"name": name, "parameters": {"binary_data": binary_output}})
        self._header: dict[str, Any] = {"inputs": header_inputs, "outputs": header_outputs}
        self._binary_body = b"".join(raws)
        self._binary = bool(raws)
        self._fixed = self.encode(None)

    @property
    def request(self) -> bytes:
        """The request of a model that is not a sequence model: the same bytes every time."""
        return self._fixed

    def encode(self, sequence: SequenceFlags | None) -> bytes:
        header = self._header if sequence is None else {**self._header, "parameters": sequence.parameters()}
        json_part = orjson.dumps(header)
        if self._binary:
            lines = (
                b"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: %d\r\n"
                b"Content-Length: %d\r\n\r\n" % (len(json_part), len(json_part) + len(self._binary_body))
            )
            return self._start + lines + json_part + self._binary_body
        lines = b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(json_part)
        return self._start + lines + json_part


def _shm_parameters(placement: Placement) -> dict[str, Any]:
    return {
        "shared_memory_region": placement.region,
        "shared_memory_byte_size": placement.byte_size,
        "shared_memory_offset": placement.offset,
    }
