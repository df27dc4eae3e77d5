"""Chooses the scheduler a model's config asks for."""

from __future__ import annotations

from ..model_config import ModelConfig
from .direct_scheduler import DirectScheduler
from .instance_runner import InstanceRunner
from .scheduler import Scheduler

__all__ = ["create_scheduler"]


def create_scheduler(config: ModelConfig, runners: list[InstanceRunner]) -> Scheduler:
    return DirectScheduler(runners)
