"""The detector interface, and the threshold-plus-baseline judgement most detectors share.

A detector is a small class with incremental state, built with its thresholds
(:mod:`..thresholds`): ``update(tick)`` returns its findings when it had new
evidence this tick (an empty list: judged, all fine) or ``None`` when it had
none (no new training report, GPUs paused) — the state machine then holds its
signals as they are. ``facts()`` exposes the latest statistics the root-cause
stage correlates across layers. It declares the signals it raises
(:class:`~..spec.SignalSpec`) and the knobs it decides by.

:class:`Threshold` is the judgement of a value against physical bounds and,
when given, against the job's own baseline: a value past ``warning`` (or
``critical``) always counts; a value past only the lower ``early`` floor counts
when it is also a clear departure from the job's baseline — so a fault that
ramps up is caught while still small, yet an always-small value never alarms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Protocol

from ..spec import FactSpec, SignalSpec
from ..stats import RobustBaseline
from ..thresholds import Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy

#: Findings scoring below ``policy.hold - REPORT_MARGIN`` (and never below REPORT_FLOOR) are
#: left out: they could not even hold an active signal, and skipping them keeps healthy ticks cheap.
REPORT_FLOOR = 0.4
REPORT_MARGIN = 0.1
#: Largest score a detector reports: beyond it nothing is learned.
SCORE_CAP = 5.0


class Detector(Protocol):
    """What the pipeline needs from a detector: a class built with its :class:`Thresholds`.

    ``signals``: the signals it raises (its knobs are named under the first). ``provides`` (optional): the
    facts ``facts()`` returns (:class:`~..spec.FactSpec`); a fact it does not declare is dropped.
    ``every_s``: the pipeline calls ``update`` at most this often (0: every
    tick) — slow physics (memory, temperature) needs no per-second look.
    """

    name: str
    signals: tuple[SignalSpec, ...]
    knobs: tuple[Knob, ...]
    policy: Policy
    every_s: float

    def update(self, tick: Tick) -> list[Finding] | None: ...

    def facts(self) -> dict[str, Any]: ...


class BaseDetector:
    """Defaults shared by the built-in detectors: thresholds given or declared, the signal's own policy."""

    name: ClassVar[str] = ""
    signals: ClassVar[tuple[SignalSpec, ...]] = ()
    knobs: ClassVar[tuple[Knob, ...]] = ()
    #: Bounds derived from another signal's knobs, as ``(signal, Knob)``: read, never copied (an override of the
    #: owner's knob moves them too), and listed in ``thresholds`` beside the owner.
    reads: ClassVar[tuple[tuple[str, Knob], ...]] = ()
    #: The facts ``facts()`` returns.
    provides: ClassVar[tuple[FactSpec, ...]] = ()
    every_s: ClassVar[float] = 0.0

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        declared = (*self.knobs, *(knob for _, knob in self.reads))
        self.thresholds = thresholds if thresholds is not None else Thresholds(declared)
        self.policy: Policy = self.signals[0].policy

    @cached_property
    def report_floor(self) -> float:
        """The lowest score worth reporting under this detector's policy."""
        return max(REPORT_FLOOR, self.policy.hold - REPORT_MARGIN)

    def facts(self) -> dict[str, Any]:
        """The latest statistics, for cross-layer correlation (none by default)."""
        return {}


@dataclass(frozen=True, slots=True)
class Threshold:
    """Physical bounds for a value, optionally with an early, baseline-relative floor.

    ``higher_is_worse=False`` flips every comparison (MFU, utilisation).
    ``early``: a value this bad is enough when it is also ``early_ratio`` times
    the baseline (``1/early_ratio`` for lower-is-worse) and ``early_z`` sigmas
    past it.
    """

    warning: float
    critical: float
    higher_is_worse: bool = True
    early: float | None = None
    early_ratio: float = 3.0
    early_z: float = 6.0

    def badness(self, value: float, bound: float) -> float:
        """How far ``value`` is past ``bound`` as a ratio (>= 1: past it)."""
        if self.higher_is_worse:
            return value / bound if bound > 0 else math.inf
        return bound / value if value > 0 else SCORE_CAP

    def judge(self, value: float, baseline: RobustBaseline | None = None) -> tuple[float, str]:
        """``(score, severity)`` of ``value`` (see :class:`~..types.Finding` for the score)."""
        score = self.badness(value, self.warning)
        if self.early is not None and baseline is not None and self._departs(value, baseline):
            score = max(score, self.badness(value, self.early))
        severity = CRITICAL if self.badness(value, self.critical) >= 1.0 else WARNING
        return min(score, SCORE_CAP), severity

    def _departs(self, value: float, baseline: RobustBaseline) -> bool:
        if not baseline.ready:
            return False
        if self.higher_is_worse:
            return value >= self.early_ratio * baseline.loc and baseline.z(value) >= self.early_z
        return value * self.early_ratio <= baseline.loc and -baseline.z(value) >= self.early_z


def threshold_of(t: Thresholds, higher_is_worse: bool = True) -> Threshold:
    """The :class:`Threshold` made of a detector's ``warning`` and ``critical`` knobs (and, where it declares
    them, ``early``, ``early_ratio`` and ``early_z``)."""
    early = getattr(t, "early", None)
    if early is None:
        return Threshold(t.warning, t.critical, higher_is_worse)
    return Threshold(t.warning, t.critical, higher_is_worse, early, t.early_ratio, t.early_z)


def percent(x: float) -> str:
    """``0.234`` → ``"23%"`` (one decimal below 10 %)."""
    p = 100.0 * x
    return f"{p:.1f}%" if abs(p) < 10 else f"{p:.0f}%"


#: A fresh job's first steps are warm-up — lazy initialisation, the first collectives' connection set-up, kernel
#: autotuning, the monitor's own start on rank 0 — and bring ranks to the first barriers at scattered times:
#: ``WARMUP_STEPS`` steps (by ``global_step``) and ``WARMUP_S`` seconds from the first report, whichever ends later
#: (a job stepping every 70 ms passes 50 steps in 3.5 s, still starting up).
WARMUP_STEPS = 50
WARMUP_S = 10.0


class JobWarmup:
    """Whether the job is past its warm-up, from the reports' ``global_step`` and the ticks' clock.

    Only a job seen from its start warms up: one first seen at step 24,000 (a daemon restarted beside a running
    job) is judged at once, and reports without ``global_step`` say nothing of it.
    """

    __slots__ = ("_fresh_since",)

    def __init__(self) -> None:
        self._fresh_since: float | None = None  # when a fresh job's first report came; None: not fresh (yet)

    def over(self, ts: float, global_step: int | None) -> bool:
        if global_step is None:
            return True
        if global_step < WARMUP_STEPS:
            if self._fresh_since is None:
                self._fresh_since = ts
            return False
        return self._fresh_since is None or ts - self._fresh_since >= WARMUP_S
