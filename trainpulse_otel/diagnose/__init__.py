"""Diagnosis: the pure stage — detectors, correlation, health, root causes.

Data in, findings out: nothing here does I/O, reads a clock or the
environment, or discovers plugins; :class:`DiagnosticPipeline` is handed its
detectors and root-cause rules. Importing this package loads nothing from
collection, telemetry, the API or the dashboard.

What a plugin author needs is exported here: a detector implements
:class:`Detector` (most extend :class:`BaseDetector`) and returns
:class:`Finding` s about a :class:`Tick`; a root-cause rule implements
:class:`RootCauseRule` and proposes :class:`Candidate` s from the
:class:`Evidence`.
"""

from .correlate import Evidence
from .detectors.base import BaseDetector, Detector, Threshold, percent
from .pipeline import DiagnosticPipeline, PipelineResult
from .rootcause import Candidate, RootCauseRule, Rule, base_confidence, symptoms
from .stats import RecentMedian, RobustBaseline, Trend, WindowMin, decay, median
from .tick import GpuState, HostState, NodeState, Tick
from .types import (
    CRITICAL,
    DEFAULT_POLICY,
    ROOT_CAUSES,
    SIGNALS,
    WARNING,
    Diagnosis,
    Finding,
    Health,
    Policy,
    RootCause,
    Signal,
    Transition,
)

__all__ = [
    "CRITICAL",
    "DEFAULT_POLICY",
    "ROOT_CAUSES",
    "SIGNALS",
    "WARNING",
    "BaseDetector",
    "Candidate",
    "Detector",
    "Diagnosis",
    "DiagnosticPipeline",
    "Evidence",
    "Finding",
    "GpuState",
    "Health",
    "HostState",
    "NodeState",
    "PipelineResult",
    "Policy",
    "RecentMedian",
    "RobustBaseline",
    "RootCause",
    "RootCauseRule",
    "Rule",
    "Signal",
    "Threshold",
    "Tick",
    "Transition",
    "Trend",
    "WindowMin",
    "base_confidence",
    "decay",
    "median",
    "percent",
    "symptoms",
]
