"""Loading a candidate into a running server through the repository API's config override
(POST /v2/repository/models/M/load with `{"parameters": {"config": "<json>"}}`), which naiad and
Triton (in explicit model control mode) both accept: a loaded model is reloaded with the new
configuration, the user's files untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..protos import model_config_pb2 as pb
from .candidate_config import config_from_json, config_json

__all__ = ["LoadOutcome", "Reloader", "RepositoryClient"]


class RepositoryClient(Protocol):
    """The calls tune makes to a server (naiad.cli's KServeClient is one). Each raises an
    exception whose text is the server's own error where the call fails."""

    def model_config(self, model: str) -> dict[str, Any]: ...

    def load_model(self, model: str, config: dict[str, Any] | None = None) -> None: ...

    def unload_model(self, model: str) -> None: ...

    def server_ready(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class LoadOutcome:
    loaded: bool
    # The server's words when the load failed ("" when it loaded).
    message: str = ""


@dataclass(slots=True)
class Reloader:
    client: RepositoryClient
    model: str

    def base_config(self) -> tuple[pb.ModelConfig, bool]:
        """The configuration the server loads the model with when asked for no override: its
        own reading of the repository (auto-complete included), the base every candidate
        changes; and whether the model was loaded before tune came (explicit mode may start
        without it, and tune then loads it first)."""
        try:
            return config_from_json(self.client.model_config(self.model)), True
        except Exception:
            self.client.load_model(self.model)
            return config_from_json(self.client.model_config(self.model)), False

    def load(self, config: pb.ModelConfig) -> LoadOutcome:
        """Load the model with `config`. A failed load is an outcome, not an error: the
        server's message is kept and the search goes on, the next candidate's load replacing
        whatever the server kept of the model."""
        try:
            self.client.load_model(self.model, config_json(config))
        except Exception as exc:
            return LoadOutcome(False, _message(exc))
        return LoadOutcome(True)

    def restore(self, base: pb.ModelConfig, was_loaded: bool) -> None:
        """Leave the server as tune found it: the model loaded again with the configuration it
        had (`base`) when it was loaded before, else unloaded; never serving a candidate's.
        A load without an override would not do: naiad, as Triton, keeps the last override
        while the model's files are unchanged."""
        try:
            if was_loaded:
                self.client.load_model(self.model, config_json(base))
            else:
                self.client.unload_model(self.model)
        except Exception:
            # Tidying up after the search: a server that has gone has nothing left to restore.
            pass


def _message(exc: Exception) -> str:
    return str(getattr(exc, "message", "") or exc)
