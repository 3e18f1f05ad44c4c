"""Diagnosis: the pure stage — detectors, correlation, health, root causes.

Data in, findings out: nothing here does I/O, reads a clock or the
environment, or discovers plugins; :class:`DiagnosticPipeline` is handed its
detectors and root-cause rules. Importing this package loads nothing from
collection, telemetry, the API or the dashboard.

What a plugin author needs is exported here: a detector declares the
:class:`SignalSpec` s it raises and its :class:`Knob` s, is built with its
:class:`Thresholds` (most extend :class:`BaseDetector`) and returns
:class:`Finding` s about a :class:`Tick`; a root-cause rule declares a
:class:`CauseSpec` and proposes :class:`Candidate` s from the
:class:`Evidence`. :data:`SIGNALS` and :data:`ROOT_CAUSES` are the built-ins'
names (the contract's).
"""

from .builtins import VOCABULARY
from .correlate import Evidence
from .detectors.base import BaseDetector, Detector, Threshold, percent
from .detectors.ranks import RANK_STRAGGLER
from .pipeline import DiagnosticPipeline, PipelineResult
from .rootcause import Candidate, RootCauseRule, Rule, base_confidence, symptoms
from .spec import CAUSE_LAYERS, COMPONENTS, SIGNAL_LAYERS, CauseSpec, FactSpec, SignalSpec
from .stats import RecentMedian, RobustBaseline, Trend, WindowMin, decay, median
from .thresholds import BASES, Knob, ThresholdError, Thresholds
from .tick import GpuState, HostState, NodeState, Tick
from .types import (
    CRITICAL,
    DEFAULT_POLICY,
    WARNING,
    Diagnosis,
    Finding,
    Health,
    Policy,
    RootCause,
    Signal,
    Transition,
)
from .vocabulary import KnobEntry, SpecError, Vocabulary

#: The contract's signal and root-cause names: the built-ins'.
SIGNALS: tuple[str, ...] = VOCABULARY.signal_names
ROOT_CAUSES: tuple[str, ...] = VOCABULARY.cause_names

__all__ = [
    "BASES",
    "CAUSE_LAYERS",
    "COMPONENTS",
    "CRITICAL",
    "DEFAULT_POLICY",
    "RANK_STRAGGLER",
    "ROOT_CAUSES",
    "SIGNALS",
    "SIGNAL_LAYERS",
    "VOCABULARY",
    "WARNING",
    "BaseDetector",
    "Candidate",
    "CauseSpec",
    "Detector",
    "Diagnosis",
    "DiagnosticPipeline",
    "Evidence",
    "FactSpec",
    "Finding",
    "GpuState",
    "Health",
    "HostState",
    "Knob",
    "KnobEntry",
    "NodeState",
    "PipelineResult",
    "Policy",
    "RecentMedian",
    "RobustBaseline",
    "RootCause",
    "RootCauseRule",
    "Rule",
    "Signal",
    "SignalSpec",
    "SpecError",
    "Threshold",
    "ThresholdError",
    "Thresholds",
    "Tick",
    "Transition",
    "Trend",
    "Vocabulary",
    "WindowMin",
    "base_confidence",
    "decay",
    "median",
    "percent",
    "symptoms",
]
