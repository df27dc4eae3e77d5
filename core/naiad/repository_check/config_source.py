"""`ConfigSource`: one model's config.pbtxt as `naiad check` reads it, and the line a
problem with it points at.

Protobuf's parse errors carry their line and column. The server's other config errors name
the field they are about in their own words (`input[0].dims`, `model input 'x'`,
`step 1 (model 'b')`, `max_batch_size`); the field's place in the text comes from
`naiad.config.field_positions`, the walk of protobuf's own tokenizer that also tells which
fields a config writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from google.protobuf.descriptor import Descriptor

from ..config.field_positions import FieldPosition, field_positions
from ..protos import model_config_pb2 as pb
from ..repository.local import ModelSource

# The generated module's descriptor, typed as the pure-Python one (the stubs offer either).
_DESCRIPTOR: Descriptor = pb.ModelConfig.DESCRIPTOR  # type: ignore[assignment]

__all__ = ["ConfigSource", "Position"]

# (line, column), each counting from 1; None for either when unknown.
Position = tuple[int | None, int | None]
_NOWHERE: Position = (None, None)

_PATH = re.compile(r"[A-Za-z_]\w*(?:\[\d+\])?(?:\.[A-Za-z_]\w*(?:\[\d+\])?)+|[A-Za-z_]\w*\[\d+\]")
_WORD = re.compile(r"[A-Za-z_]\w*")
_STEP = re.compile(r"\bstep (\d+)\b")
_TENSOR = re.compile(r"\b(input|output|tensor) '([^']+)'")
_INDEX = re.compile(r"\[\d+\]")


@dataclass(slots=True)
class ConfigSource:
    """`file`: config.pbtxt relative to its repository (the model's directory, with a
    trailing slash, when it has no config file); `text` None when it has none. `proto` is
    the parsed config once it parsed: problems that name a tensor are placed by it."""

    model: str
    file: str
    text: str | None
    proto: pb.ModelConfig | None = None
    _positions: dict[str, FieldPosition] | None = field(default=None, repr=False)

    @classmethod
    def read(cls, source: ModelSource, config_name: str) -> ConfigSource:
        path = source.config_path(config_name)
        text = source.config_text(config_name)
        if text is None:
            return cls(source.name, f"{source.name}/", None)
        return cls(source.name, path.relative_to(source.repository).as_posix(), text)

    @property
    def positions(self) -> dict[str, FieldPosition]:
        # Walked on first use, after the real parser accepted the text.
        if self._positions is None:
            self._positions = field_positions(self.text or "", _DESCRIPTOR)
        return self._positions

    def position(self, path: str) -> Position:
        """Where field `path` is written (`input[0].dims`; `instance_group.passive` finds
        the first group's); the enclosing message's place when the field itself is not
        written; (None, None) when neither is."""
        while path:
            at = self.positions.get(path)
            if at is None and not _INDEX.search(path):
                at = next((p for key, p in self.positions.items() if _INDEX.sub("", key) == path), None)
            if at is not None:
                return at.line, at.column
            path = path.rpartition(".")[0]
        return _NOWHERE

    def locate(self, message: str, field: str = "", *, words: bool = True) -> Position:
        """Where a problem described by `message` lies: the first field path it names,
        else the ensemble step, else the tensor, else (with `words`) a field named by a
        plain word, else `field` (what the check that found it is about)."""
        for found in _PATH.finditer(message):
            if self._written_under(found.group()):
                return self.position(found.group())
        step = _STEP.search(message)
        if step is not None and self._written_under(f"ensemble_scheduling.step[{step[1]}]"):
            return self.position(f"ensemble_scheduling.step[{step[1]}]")
        for kind, name in _TENSOR.findall(message):
            at = self._tensor_position(kind, name)
            if at != _NOWHERE:
                return at
        for word in _WORD.findall(message) if words else ():
            if word in self.positions and self.positions[word].scalar:
                return self.position(word)
        return self.position(field) if field else _NOWHERE

    def _written_under(self, path: str) -> bool:
        bare = _INDEX.sub("", path)
        return any(key == path or key.startswith(path + ".") or _INDEX.sub("", key) == bare for key in self.positions)

    def _tensor_position(self, kind: str, name: str) -> Position:
        if self.proto is None:
            return _NOWHERE
        groups = ("input", "output") if kind == "tensor" else (kind,)
        for group in groups:
            for index, tensor in enumerate(getattr(self.proto, group)):
                if tensor.name == name:
                    return self.position(f"{group}[{index}]")
        return _NOWHERE
