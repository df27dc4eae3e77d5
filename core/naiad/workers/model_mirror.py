"""A front door's copy of what the model home serves: each model's serving versions with
their configs, and the state of the others.

Frontends read a model's config for every request (to decode a raw binary body, to tell a
decoupled model from another), so a front door keeps the table the model home sends it
whenever it changes, instead of asking across processes each time. Statistics, readiness
and the repository index are asked of the model home when a client asks for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config.model_config import ModelConfig
from ..errors import NaiadError
from ..models.manager import ModelManager
from ..models.records import select_version, unknown_model
from ..protos import model_config_pb2 as pb

__all__ = ["ModelMirror", "MirroredVersion", "ModelTable", "model_table"]

# [(name, [(version, serialized ModelConfig, labels)], {version: (state, reason)})]
ModelTable = list[tuple[str, list[tuple[int, bytes, dict[str, tuple[str, ...]]]], dict[int, tuple[str, str]]]]


def model_table(models: ModelManager) -> ModelTable:
    """The model home's table, as it sends it to the front doors."""
    table: ModelTable = []
    for name in models.names():
        record = models.known(name)
        if record is None:
            continue
        serving = [
            (version, loaded.config.proto.SerializeToString(), loaded.config.labels)
            for version, loaded in sorted(record.serving.items())
        ]
        table.append((name, serving, dict(record.states)))
    return table


@dataclass(eq=False)
class MirroredVersion:
    """A model version the model home serves, as the frontends see it (`Server.model`)."""

    name: str
    version: int
    config: ModelConfig
    # Asks the model home whether this version is ready now (a model's process may be
    # restarting, an ensemble's step gone).
    _ready: Callable[[str, str], bool]

    def is_ready(self) -> bool:
        return self._ready(self.name, str(self.version))


class ModelMirror:
    """The latest table; configs parsed once per change of their bytes."""

    def __init__(self, ready: Callable[[str, str], bool]) -> None:
        self._ready = ready
        self._serving: dict[str, dict[int, MirroredVersion]] = {}
        self._states: dict[str, dict[int, tuple[str, str]]] = {}
        self._parsed: dict[tuple[str, int, bytes], MirroredVersion] = {}
        # Set while the model home is out of reach: the server is not ready meanwhile.
        self.unreachable: str | None = "the server is still loading its models"
        # Until the first table, no model is known; after it, the last table answers while
        # the model home is away, so that requests reach the front door's wait for it.
        self._has_table = False

    def update(self, table: ModelTable) -> None:
        serving: dict[str, dict[int, MirroredVersion]] = {}
        states: dict[str, dict[int, tuple[str, str]]] = {}
        parsed: dict[tuple[str, int, bytes], MirroredVersion] = {}
        for name, versions, version_states in table:
            states[name] = version_states
            serving[name] = {}
            for version, config_bytes, labels in versions:
                key = (name, version, config_bytes)
                mirrored = self._parsed.get(key)
                if mirrored is None:
                    config = ModelConfig(pb.ModelConfig.FromString(config_bytes), labels)
                    mirrored = MirroredVersion(name, version, config, self._ready)
                parsed[key] = serving[name][version] = mirrored
        self._serving, self._states, self._parsed = serving, states, parsed
        self.unreachable = None
        self._has_table = True

    def lost(self, reason: str) -> None:
        """The model home went away: not ready until it sends a table again."""
        self.unreachable = reason

    def get(self, name: str, version: str = "") -> MirroredVersion:
        """As `ModelManager.get` answers, from the copy."""
        if not self._has_table:
            raise NaiadError.unavailable(f"model '{name}' is not available: {self.unreachable}")
        serving = self._serving.get(name)
        if serving is None:
            raise NaiadError.not_found(unknown_model(name, version))
        return select_version(name, version, serving, self._states[name])

    def versions(self, name: str) -> list[int]:
        """The versions of `name` that serve, lowest first."""
        return sorted(self._serving.get(name, {}))

    def ready_models(self) -> list[MirroredVersion]:
        return [v for versions in self._serving.values() for v in versions.values()]

    def names(self) -> list[str]:
        return sorted(name for name, versions in self._serving.items() if versions)

    def describe(self) -> dict[str, Any]:
        """For logs and tests: which versions of which models serve."""
        return {name: sorted(versions) for name, versions in self._serving.items() if versions}
