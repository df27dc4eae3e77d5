"""Chooses the scheduler a model's config asks for."""

from __future__ import annotations

from ..config.model_config import ModelConfig
from .direct_scheduler import DirectScheduler
from .dynamic_batcher import DynamicBatcher
from .instance_runner import InstanceRunner
from .scheduler import Scheduler
from .sequence_batcher import SequenceBatcher

__all__ = ["create_scheduler"]


def create_scheduler(config: ModelConfig, runners: list[InstanceRunner]) -> Scheduler:
    """`sequence_batching` and `dynamic_batching` get their batchers; a model with
    neither runs each request on the next free instance."""
    choice = config.scheduling
    if choice == "sequence_batching":
        return SequenceBatcher(config, runners)
    if choice == "dynamic_batching":
        return DynamicBatcher(config, runners)
    return DirectScheduler(runners)
