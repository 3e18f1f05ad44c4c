"""The built-in detectors, one module per family; :mod:`..builtins` lists them.

A detector is a class built with its :class:`~..thresholds.Thresholds` whose
instances have ``name``, ``signals`` (the :class:`~..spec.SignalSpec` s it
raises), ``knobs``, ``policy``, ``every_s``, ``update(tick)`` and ``facts()``
(see :class:`~.base.Detector`); ``DiagnosticPipeline(detectors, rules)`` takes
instances. Third-party detectors come from the ``trainpulse.detectors`` entry
points (:mod:`trainpulse_otel.runtime.plugins`).
"""

from __future__ import annotations

from .base import BaseDetector, Detector, Threshold
from .comms import AllreduceWait, SyncImbalance
from .forecast import GpuOomRisk, HostOomRisk
from .inputs import DataloaderStarvation, TokenizerStall
from .llm import LowMfu, SequencePadding
from .memory import GpuMemoryPressure, HostMemoryPressure
from .ranks import RankStraggler
from .schedule import CheckpointStall, PipelineBubble
from .thermal import ThermalInstability
from .thermal_forecast import ThermalThrottleRisk
from .throughput import GpuUnderutilization, ThroughputCollapse

__all__ = [
    "AllreduceWait",
    "BaseDetector",
    "CheckpointStall",
    "DataloaderStarvation",
    "Detector",
    "GpuMemoryPressure",
    "GpuOomRisk",
    "GpuUnderutilization",
    "HostMemoryPressure",
    "HostOomRisk",
    "LowMfu",
    "PipelineBubble",
    "RankStraggler",
    "SequencePadding",
    "SyncImbalance",
    "ThermalInstability",
    "ThermalThrottleRisk",
    "Threshold",
    "ThroughputCollapse",
    "TokenizerStall",
]
