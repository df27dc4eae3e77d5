"""The text-in/text-out convention a naiad model follows to be served as an OpenAI model,
after the tensor names of Triton's OpenAI frontend (its TensorRT-LLM / Python-model form):

- input `text_input` (BYTES): the prompt; output `text_output` (BYTES): generated text. A
  model may answer in many responses (decoupled); the text is their `text_output`s joined.
- `stream` (BOOL): whether the client streams. Every other field of the OpenAI request that
  holds a string, number or boolean (`max_tokens`, `temperature`, `top_p`, `seed`, ... and any
  extra field a client sends) is passed on under its own name: as an input when the model
  declares one of that name (Triton's TensorRT-LLM names: `max_tokens` INT32, `temperature`
  FP32, ...), as a request parameter otherwise. `max_completion_tokens` is passed as
  `max_tokens`. `stop` (a string or a list) goes to a BYTES input `stop_words`, which the model
  must then declare. Other lists and objects (`tools`, `logit_bias`, ...) are not passed on.

The request is built by the generate extension's mapping (`naiad.frontends.http.generate_mapping`),
so shapes and datatypes follow the model's config exactly as `/generate` would fill them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from naiad import InferenceRequest, InferenceResponse, ModelConfig, NaiadError
from naiad.frontends.http import generate_request

__all__ = ["TEXT_INPUT", "TEXT_OUTPUT", "follows_convention", "text_request", "text_of"]

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
_STOP_WORDS = "stop_words"
# Fields of an OpenAI request that steer this frontend rather than the model.
_NOT_PASSED_ON = frozenset({"model", "prompt", "messages", "stream", "n", "stop", "user", "max_completion_tokens"})


def follows_convention(config: ModelConfig) -> bool:
    """Whether a model takes its prompt in `text_input` and answers in `text_output`, both BYTES."""
    text_in = config.input_by_name.get(TEXT_INPUT)
    text_out = next((o for o in config.outputs if o.name == TEXT_OUTPUT), None)
    return text_in is not None and text_out is not None and text_in.datatype == text_out.datatype == "BYTES"


def text_request(config: ModelConfig, prompt: str, stream: bool, body: Mapping[str, Any]) -> InferenceRequest:
    """The inference request for `prompt` and the sampling fields of an OpenAI request body."""
    document: dict[str, Any] = {TEXT_INPUT: prompt, "stream": stream}
    for field, value in body.items():
        if field not in _NOT_PASSED_ON and isinstance(value, (str, int, float)):
            document[field] = value
    if isinstance(body.get("max_completion_tokens"), int):
        document["max_tokens"] = body["max_completion_tokens"]
    stop = body.get("stop")
    if stop is not None:
        if _STOP_WORDS not in config.input_by_name:
            raise NaiadError.invalid(
                f"model '{config.name}' takes no '{_STOP_WORDS}' input, so 'stop' is not supported"
            )
        document[_STOP_WORDS] = [stop] if isinstance(stop, str) else stop
    return generate_request(document, config)


def text_of(response: InferenceResponse) -> str:
    """The text one response carries ("" when it has no `text_output`)."""
    tensor = response.output(TEXT_OUTPUT)
    if tensor is None:
        return ""
    return "".join(
        item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item) for item in tensor.data.reshape(-1)
    )
