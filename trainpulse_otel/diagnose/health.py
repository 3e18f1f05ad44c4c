"""The 0–100 health score and status.

Formula (documented in docs/signals.md):

    penalty(signal) = impact(signal) × (2.5 if critical else 1), at most 0.6
    penalty(name)   = the largest penalty among that signal's subjects
                      × (1 + 0.1 × (subjects − 1)), at most 1.5× and 0.9
    target          = 100 × Π over signal names (1 − penalty(name))
    score           ← score + (target − score) × (1 − e^(−dt/τ)),
                      τ = 5 s while falling, 30 s while recovering

Multiplying keeps the score in 0–100 however many signals are active and lets
several problems compound; the asymmetric smoothing drops the score within
seconds of a fault but lets it recover only once the job has stayed well.
Status: ``critical`` while any signal is critical or the score is under 50,
``degraded`` while any signal is active or the score is under 80, else
``healthy``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .stats import decay
from .types import CRITICAL, DEGRADED, HEALTHY, STATUS_CRITICAL, Health, Signal

#: The impact of a signal no spec declares (never one a pipeline raises: every signal is declared).
DEFAULT_IMPACT = 0.08
CRITICAL_FACTOR = 2.5
MAX_SIGNAL_PENALTY = 0.6
MAX_NAME_PENALTY = 0.9
#: Each further subject of one signal (another GPU, another rank) adds this share of its penalty, up to MAX_SPREAD.
SPREAD_PER_SUBJECT = 0.1
MAX_SPREAD = 1.5
#: The status is critical under this score, degraded under the next.
CRITICAL_BELOW = 50.0
DEGRADED_BELOW = 80.0
FALL_TAU_S = 5.0
RISE_TAU_S = 30.0


def target_score(signals: Iterable[Signal], impacts: Mapping[str, float]) -> float:
    """The unsmoothed score for a set of active signals, each costing its spec's ``impact``."""
    worst: dict[str, float] = {}
    count: dict[str, int] = {}
    for s in signals:
        p = impacts.get(s.name, DEFAULT_IMPACT) * (CRITICAL_FACTOR if s.severity == CRITICAL else 1.0)
        worst[s.name] = max(worst.get(s.name, 0.0), min(p, MAX_SIGNAL_PENALTY))
        count[s.name] = count.get(s.name, 0) + 1
    score = 100.0
    for name, p in worst.items():
        spread = min(MAX_SPREAD, 1.0 + SPREAD_PER_SUBJECT * (count[name] - 1))
        score *= 1.0 - min(MAX_NAME_PENALTY, p * spread)
    return score


def status_for(score: float, signals: Iterable[Signal]) -> str:
    """The status word for a smoothed score and the active signals."""
    severities = {s.severity for s in signals}
    if CRITICAL in severities or score < CRITICAL_BELOW:
        return STATUS_CRITICAL
    if severities or score < DEGRADED_BELOW:
        return DEGRADED
    return HEALTHY


class HealthScorer:
    """Smooths the target score over frame time; one instance per pipeline, handed the signals' impacts."""

    def __init__(self, impacts: Mapping[str, float]) -> None:
        self.impacts = impacts
        self.score = 100.0
        self._last_ts: float | None = None

    def update(self, ts: float, signals: tuple[Signal, ...]) -> Health:
        """The health at ``ts`` given the signals active then."""
        target = target_score(signals, self.impacts) if signals else 100.0
        dt = 0.0 if self._last_ts is None else max(0.0, ts - self._last_ts)
        self._last_ts = ts
        if target != self.score:
            keep = decay(dt, FALL_TAU_S if target < self.score else RISE_TAU_S)
            self.score = target + (self.score - target) * keep
            if abs(self.score - target) < 0.05:
                self.score = target
        return Health(score=self.score, status=status_for(self.score, signals))
