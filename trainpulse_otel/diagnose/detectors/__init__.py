"""The built-in detectors, one module per family.

``BUILTIN_DETECTORS`` is the registry: a plain tuple of classes, each built
with no arguments. The pipeline takes any sequence of detector instances, so
a plugin seam (a ``trainpulse.detectors`` entry-point group) only has to add
instances to :func:`default_detectors`' result.
"""

from __future__ import annotations

from .base import BaseDetector, Detector, Threshold
from .comms import AllreduceWait, SyncImbalance
from .forecast import GpuOomRisk, HostOomRisk, ThermalThrottleRisk
from .inputs import DataloaderStarvation, TokenizerStall
from .llm import LowMfu, SequencePadding
from .memory import GpuMemoryPressure, HostMemoryPressure
from .ranks import RankStraggler
from .schedule import CheckpointStall, PipelineBubble
from .thermal import ThermalInstability
from .throughput import GpuUnderutilization, ThroughputCollapse

BUILTIN_DETECTORS: tuple[type, ...] = (
    ThroughputCollapse,
    GpuUnderutilization,
    DataloaderStarvation,
    TokenizerStall,
    SyncImbalance,
    AllreduceWait,
    RankStraggler,
    GpuMemoryPressure,
    HostMemoryPressure,
    ThermalInstability,
    LowMfu,
    SequencePadding,
    CheckpointStall,
    PipelineBubble,
    GpuOomRisk,
    HostOomRisk,
    ThermalThrottleRisk,
)


def default_detectors() -> list[Detector]:
    """A fresh instance of every built-in detector."""
    return [cls() for cls in BUILTIN_DETECTORS]


__all__ = ["BUILTIN_DETECTORS", "BaseDetector", "Detector", "Threshold", "default_detectors"]
