"""The in-process instrumentation: :class:`TrainingMonitor` and its parts."""

from .core import TrainingMonitor

__all__ = ["TrainingMonitor"]
