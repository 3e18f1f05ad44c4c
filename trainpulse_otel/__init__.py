"""TrainPulse: OpenTelemetry-native predictive diagnostics for AI and LLM training jobs.

Importing the package is cheap: :class:`TrainingMonitor` (and the OTel SDK
behind it) loads on first use.
"""

from typing import Any

from .version import __version__

__all__ = ["TrainingMonitor", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "TrainingMonitor":
        from .integrations.monitor import TrainingMonitor

        return TrainingMonitor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
