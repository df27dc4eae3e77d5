"""The response cache: what `--cache-config` selects, how a request becomes a key, and how
a response is stored.

As in Triton, a model uses the cache when the server has one (`--cache-config local,...`
or `redis,...`) and its config says `response_cache { enable: true }`. The key hashes
what decides the answer: model name and version, every input (name, datatype, shape,
bytes, in name order), the outputs asked for and the request's own parameters. Triton
hashes only input names and bytes, so two requests differing in shape or in the outputs
they ask for could share an entry there; naiad keeps them apart. Only successful
responses are stored (Triton stores a model's error response too).
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..datatypes import tensor_from_raw, tensor_to_raw
from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..tensor import Tensor

if TYPE_CHECKING:
    from ..config.model_config import ModelConfig

log = logging.getLogger("naiad.cache")

__all__ = [
    "CacheSpec",
    "ResponseCache",
    "cache_spec_from_flags",
    "check_cache_config",
    "request_key",
    "encode_response",
    "decode_response",
    "open_cache",
]


@dataclass(frozen=True)
class CacheSpec:
    """One cache implementation and its settings, as `--cache-config NAME,KEY=VALUE` gives them."""

    name: str
    settings: dict[str, str] = field(default_factory=dict)


def cache_spec_from_flags(items: list[str] | None, byte_size: int | None) -> CacheSpec | None:
    """The cache `--cache-config` items (repeatable) or the deprecated
    `--response-cache-byte-size` ask for; None when neither is given. Triton's words for
    each mistake."""
    if items and byte_size is not None:
        raise NaiadError.invalid(
            "Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. "
            "Please provide one or the other."
        )
    if byte_size is not None:
        log.warning(
            "--response-cache-byte-size is deprecated; the equivalent is --cache-config local,size=%d", byte_size
        )
        return CacheSpec("local", {"size": str(byte_size)})
    if not items:
        return None
    specs: dict[str, dict[str, str]] = {}
    for item in items:
        name, comma, setting = item.partition(",")
        if not comma or not name:
            raise NaiadError.invalid(
                f"No cache specified. --cache-config option format is <cache name>,<setting>=<value>. Got {item}"
            )
        key, equals, value = setting.partition("=")
        if not equals:
            raise NaiadError.invalid(f"--cache-config option format is '<cache name>,<setting>=<value>'. Got {item}")
        specs.setdefault(name, {})[key] = value
    if len(specs) > 1:
        raise NaiadError.invalid("found multiple cache configurations, but only a single cache is currently supported")
    name, settings = next(iter(specs.items()))
    return CacheSpec(name, settings)


class ResponseCache(Protocol):
    """What a cache implementation provides. Both calls run on the server's event loop."""

    async def lookup(self, key: bytes) -> bytes | None: ...

    async def insert(self, key: bytes, entry: bytes) -> bool:
        """Store `entry`; False when the key was already there (a concurrent identical
        request got there first), True otherwise (also when it was too large to keep)."""
        ...

    def gauges(self) -> dict[str, float]:
        """Server-wide gauges by Triton's family name (none for caches that keep none)."""
        ...

    async def close(self) -> None: ...


async def open_cache(spec: CacheSpec) -> ResponseCache:
    """Build the cache `spec` names; a setting it cannot use fails the start-up."""
    if spec.name == "local":
        from .local_cache import LocalCache

        return LocalCache.from_settings(spec.settings)
    if spec.name == "redis":
        from .redis_cache import RedisCache

        return await RedisCache.connect(spec.settings)
    raise NaiadError.invalid(
        f"unknown cache implementation '{spec.name}' in --cache-config: naiad has 'local' and 'redis'"
    )


def check_cache_config(config: ModelConfig) -> None:
    """Refuse the configs Triton refuses: a response cache on a decoupled model or one with
    a sequence batcher (Triton's words; checked whether or not the server has a cache)."""
    proto = config.proto
    if not proto.response_cache.enable:
        return
    if proto.model_transaction_policy.decoupled:
        raise NaiadError.invalid(
            f"Response Cache does not currently support model {config.name} with 'decoupled' transaction policy. "
            "Please disable the response cache."
        )
    if proto.HasField("sequence_batching"):
        raise NaiadError.invalid(
            f"Response Cache does not currently support model {config.name} with sequence batching scheduler. "
            "Please disable the response cache."
        )


def request_key(request: InferenceRequest, model_name: str, version: str) -> bytes:
    """A 32-byte digest of everything in `request` that decides its answer."""
    digest = hashlib.blake2b(digest_size=32)

    def add(data: bytes | memoryview) -> None:
        digest.update(struct.pack("<Q", len(data)))
        digest.update(data)

    add(model_name.encode())
    add(version.encode())
    for tensor in sorted(request.inputs, key=lambda t: t.name):
        add(tensor.name.encode())
        add(tensor.datatype.encode())
        add(struct.pack(f"<{len(tensor.shape)}q", *tensor.shape))
        add(tensor_to_raw(tensor.datatype, tensor.data))
    add(json.dumps(sorted(o.name for o in request.outputs)).encode())
    add(json.dumps(request.parameters, sort_keys=True, default=repr).encode())
    return digest.digest()


def encode_response(response: InferenceResponse) -> bytes:
    """A response's outputs and parameters as one byte string (its size is what the cache counts)."""
    header: dict[str, Any] = {"parameters": response.parameters, "outputs": []}
    chunks: list[bytes | memoryview] = []
    for tensor in response.outputs:
        raw = tensor_to_raw(tensor.datatype, tensor.data)
        header["outputs"].append([tensor.name, tensor.datatype, list(tensor.shape), len(raw)])
        chunks.append(raw)
    head = json.dumps(header).encode()
    return b"".join([struct.pack("<I", len(head)), head, *chunks])


def decode_response(entry: bytes) -> InferenceResponse:
    """A fresh response from a stored entry: callers may change it freely."""
    (length,) = struct.unpack_from("<I", entry)
    header = json.loads(entry[4 : 4 + length])
    offset = 4 + length
    outputs = []
    for name, datatype, shape, size in header["outputs"]:
        data = tensor_from_raw(datatype, tuple(shape), entry[offset : offset + size])
        outputs.append(Tensor(name, datatype, tuple(shape), np.array(data)))
        offset += size
    return InferenceResponse(outputs=outputs, parameters=header["parameters"])
