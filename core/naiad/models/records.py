"""What the model manager knows of each model: the versions that serve it (`LoadedVersion`),
and per name what serves, the index's view and the cumulative statistics (`ModelRecord`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ..backend.abi import Model
from ..config.model_config import ModelConfig
from ..errors import NaiadError
from ..observability.statistics import ModelStatistics
from ..scheduling.instance_runner import InstanceRunner
from ..scheduling.scheduler import Scheduler

__all__ = ["LoadedVersion", "ModelRecord", "ModelState", "unknown_model", "select_version"]


class ModelState:
    """Triton's model state names, as the repository index reports them."""

    READY = "READY"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(eq=False)
class LoadedVersion:
    """One servable model version."""

    name: str
    version: int
    config: ModelConfig
    scheduler: Scheduler
    statistics: ModelStatistics
    model: Model | None = None
    runners: list[InstanceRunner] = field(default_factory=list)
    # (model files, version files) fingerprints it was built from; a reload reuses a
    # version whose fingerprints did not change.
    fingerprint: tuple[str, str] | None = None
    # For ensembles: why a model it uses is missing (None when every one is ready).
    dependency_problem: Callable[[], str | None] | None = None

    def is_ready(self) -> bool:
        if self.dependency_problem is not None and self.dependency_problem() is not None:
            return False
        return self.model is None or self.model.is_ready()


@dataclass(eq=False)
class ModelRecord:
    """Everything known about one model name: what serves, and the index's view."""

    name: str
    serving: dict[int, LoadedVersion] = field(default_factory=dict)
    # Index rows by version (0 when the failure came before versions were known).
    states: dict[int, tuple[str, str]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Fingerprint of the model directory at the last load attempt (poll mode compares it).
    fingerprint: str | None = None
    # Counters by version, kept across reloads and unloads so Prometheus counters and the
    # statistics extension stay cumulative for the life of the server.
    statistics: dict[int, ModelStatistics] = field(default_factory=dict)


def unknown_model(name: str, version: str = "") -> str:
    """Triton's words for a model (version) the server does not serve; clients match on them."""
    return f"Request for unknown model: '{name}'" + (f" version {version}" if version else "") + " is not found"


_Version = TypeVar("_Version")


def select_version(
    name: str, version: str, serving: Mapping[int, _Version], states: Mapping[int, tuple[str, str]]
) -> _Version:
    """The version of `serving` that serves `name`/`version` ("" or "-1": the highest), or
    the error Triton answers: NOT_FOUND for an unknown model or version, UNAVAILABLE with
    the reason for one known but not serving, INVALID_ARG for a version that is no number.
    The model manager and a front door's copy of its table answer alike through it."""
    if not serving:
        if states:
            reason = "; ".join(r for _, r in states.values() if r)
            raise NaiadError.unavailable(f"model '{name}' is not ready" + (f": {reason}" if reason else ""))
        raise NaiadError.not_found(unknown_model(name, version))
    if version in ("", "-1"):
        return serving[max(serving)]
    try:
        number = int(version)
    except ValueError:
        raise NaiadError.invalid(
            f"failed to get model version from specified version string '{version}', version should be an "
            "integral value > 0"
        ) from None
    found = serving.get(number)
    if found is None:
        raise NaiadError.not_found(f"{unknown_model(name, version)} (loaded versions: {sorted(serving)})")
    return found
