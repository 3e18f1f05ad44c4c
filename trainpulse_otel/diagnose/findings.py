"""What a detector says about one tick, and how the shared state machine treats it.

A detector does not raise signals itself. Each time it has new evidence it
returns :class:`Finding` s — "the condition for this signal on this subject
holds this strongly" — and the pipeline's state machine
(:mod:`.tracker`) turns the stream of findings into raised and cleared
signals under the detector's :class:`Policy`: persistence before a raise,
Schmitt-trigger hysteresis and a hold-down before a clear. Keeping that in
one place is what makes every signal behave alike and keeps the detectors
small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .types import WARNING


@dataclass(frozen=True, slots=True)
class Policy:
    """How findings of one signal become a raised or cleared signal.

    ``raise_evidence``: a pending signal is raised once the sum of
    ``min(score, 3)`` over consecutive observations with ``score >= 1``
    reaches this, and there were at least ``min_observations`` of them — so a
    marginal fault needs three observations, a clear one (score 1.25) two,
    and a single noisy one never suffices. ``hold``: an active signal stays active while
    its score is at least this (below 1: hysteresis). ``clear_after_s``: it
    clears after its score stayed below ``hold`` this long (hold-down, no
    flapping). ``stale_after_s``: a subject its detector has not judged for
    this long is cleared (the GPU vanished, the job stopped reporting).
    """

    raise_evidence: float = 2.5
    min_observations: int = 2
    hold: float = 0.75
    clear_after_s: float = 20.0
    stale_after_s: float = 180.0


DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class Finding:
    """One detector's judgement of one signal on one subject, at one tick.

    ``score`` is the detector's statistic scaled to its raise threshold:
    ``>= 1`` means the raise condition holds (2 means twice as far past it),
    ``policy.hold <= score < 1`` is enough to keep an active signal. Detectors
    leave out subjects scoring below about half the hold level: a subject the
    detector judged and did not mention counts as score 0.
    """

    signal: str
    score: float
    severity: str = WARNING
    message: str = ""
    subject: Mapping[str, Any] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """What the state machine keys on: the signal and its subject."""
        return (self.signal, *self.subject.items())
