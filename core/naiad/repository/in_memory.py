"""A repository held in memory: models whose config is generated, not read from a file
(models declared in Python with `@naiad.model`). The model manager lists, loads, reloads and
unloads them as it does a directory's models; each has one version and no files."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

from .local import ModelSource

__all__ = ["InMemoryModelSource", "InMemoryRepository"]


@dataclass(frozen=True, slots=True)
class InMemoryModelSource(ModelSource):
    """A model with its config text in memory and a single version 1. `stamp` stands for
    everything the model runs: a new stamp makes a load build the model again, as a changed
    file does for a directory's model."""

    config: str = ""
    stamp: str = ""

    def config_text(self, config_name: str = "") -> str | None:
        return self.config

    def versions(self) -> list[int]:
        return [1]

    def version_path(self, version: int) -> Path:
        # No files: a path a backend may name, never one it reads.
        return self.path / str(version)

    def model_fingerprint(self) -> str:
        return self.stamp

    def version_fingerprint(self, version: int) -> str:
        return self.stamp

    def fingerprint(self) -> str:
        return self.stamp


class InMemoryRepository:
    """Models set by the program that owns the repository; `location` names them in
    messages (the app file they come from)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._models: dict[str, InMemoryModelSource] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"InMemoryRepository({self.location!r})"

    def refresh(self) -> None:
        """Nothing to fetch: the owner sets the models."""

    def list_models(self) -> dict[str, ModelSource]:
        return dict(self._models)

    def set_models(self, models: dict[str, tuple[str, Path]]) -> None:
        """Replace every model: name -> (config text, the model's directory). Each gets a
        stamp of its own, so that loading it again builds it again (its code may have
        changed where its config did not)."""
        with self._lock:
            self._generation += 1
            sources = {}
            for name, (config, directory) in models.items():
                digest = hashlib.sha256(config.encode()).hexdigest()[:16]
                stamp = f"{self._generation}:{digest}"
                sources[name] = InMemoryModelSource(name, directory, directory, config=config, stamp=stamp)
            self._models = sources
