"""Root-cause inference: the contract's causes, ranked, deepest explanation first.

Each rule looks at the active signals and the cross-layer :class:`Evidence`
and proposes candidates: a cause, the signals that are its direct evidence
(*primary*), the signals it accounts for as consequences (*explains*), a
subject, a summary with the numbers, and what to do.

Ranking: a candidate starts from its own evidence (0.55–0.85, higher when
the signals are critical or a cross-layer check confirms it) and gains 0.05
for each consequence it explains, up to 0.95. A candidate whose primary
signal another candidate explains is a consequence itself and ends at least
0.1 below it: a thermally throttled GPU that makes its rank a straggler is
``gpu_thermal_throttling`` first and ``straggler_rank`` second; padding that
accounts for low MFU means ``compute_inefficiency`` is not proposed at all,
since that cause is only inferred for low MFU, idle GPUs or lost throughput
that nothing else explains.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..correlate import Evidence
from ..tick import NodeState
from ..types import CRITICAL, RootCause, Signal

log = logging.getLogger(__name__)

MAX_CONFIDENCE = 0.95
PER_EXPLAINED = 0.05
BELOW_EXPLAINER = 0.10
MAX_CAUSES = 6
#: Equal confidence is broken by layer, deepest first: hardware, then ranks, then the step's waits, then
#: what is left; causes of plugin rules come after these, in the order they were found.
TIE_ORDER: tuple[str, ...] = (
    "gpu_thermal_throttling",
    "gpu_power_throttling",
    "gpu_memory_pressure",
    "host_memory_pressure",
    "straggler_rank",
    "load_imbalance",
    "input_pipeline_bound",
    "tokenizer_bound",
    "communication_bound",
    "checkpoint_io_bound",
    "pipeline_bubbles",
    "padding_waste",
    "compute_inefficiency",
)
_TIE_RANK = {cause: i for i, cause in enumerate(TIE_ORDER)}
#: The job-wide symptoms a deeper cause may account for.
SYMPTOMS = ("throughput_collapse", "gpu_underutilization", "low_mfu", "sync_imbalance")


@dataclass
class Candidate:
    """A proposed cause before ranking."""

    cause: str
    base: float
    summary: str
    remediation: str
    primary: list[Signal]
    explains: list[Signal] = field(default_factory=list)
    subject: dict[str, Any] = field(default_factory=dict)
    confidence: float = 0.0


@runtime_checkable
class RootCauseRule(Protocol):
    """Proposes candidate causes from the active signals and the cross-layer evidence.

    Rules are plugins (the ``trainpulse.root_causes`` entry-point group), so a
    plugin detector's signal can become a cause. ``residual`` rules run after
    the others and see, in ``evidence.explained``, which signals those already
    account for: they propose only for what is left.
    """

    name: str
    residual: bool

    def propose(self, evidence: Evidence) -> list[Candidate]: ...


@dataclass(frozen=True)
class Rule:
    """A rule made of a function: how the built-ins are written."""

    name: str
    proposer: Callable[[Evidence], list[Candidate]]
    residual: bool = False

    def propose(self, evidence: Evidence) -> list[Candidate]:
        return self.proposer(evidence)


def base_confidence(signals: Iterable[Signal], warning: float = 0.6, critical: float = 0.75) -> float:
    return critical if any(s.severity == CRITICAL for s in signals) else warning


def symptoms(ev: Evidence, *names: str) -> list[Signal]:
    """The active job-wide symptom signals among ``names`` (all SYMPTOMS by default)."""
    return [s for s in (ev.job_signal(n) for n in (names or SYMPTOMS)) if s is not None]


def pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.0f}%"


def rank_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """Score, demote the consequences below what explains them, and sort."""
    explainers: dict[int, list[Candidate]] = {}
    for c in candidates:
        c.confidence = min(MAX_CONFIDENCE, c.base + PER_EXPLAINED * len({id(s) for s in c.explains}))
        for s in c.explains:
            explainers.setdefault(id(s), []).append(c)
    for c in candidates:
        deeper = [o for s in c.primary for o in explainers.get(id(s), ()) if o is not c]
        if deeper:
            c.confidence = max(0.05, min(c.confidence, max(o.confidence for o in deeper) - BELOW_EXPLAINER))
    return sorted(candidates, key=lambda c: (-c.confidence, _TIE_RANK.get(c.cause, len(TIE_ORDER))))


def infer_root_causes(
    signals: tuple[Signal, ...], facts: Mapping[str, Any], node: NodeState, ts: float, rules: Sequence[RootCauseRule]
) -> tuple[RootCause, ...]:
    """The ranked root causes for the active signals (empty when none are active)."""
    if not signals:
        return ()
    ev = Evidence(signals, facts, node, ts)
    candidates = [c for rule in rules if not rule.residual for c in _proposals(rule, ev)]
    ev.explained = frozenset(id(s) for c in candidates for s in c.explains)
    candidates += [c for rule in rules if rule.residual for c in _proposals(rule, ev)]
    ranked = rank_candidates(candidates)[:MAX_CAUSES]
    return tuple(_to_root_cause(c) for c in ranked)


_failed_rules: set[str] = set()


def _proposals(rule: RootCauseRule, ev: Evidence) -> list[Candidate]:
    """What one rule proposes; a failing rule (a plugin's bug) proposes nothing and is logged once."""
    try:
        return list(rule.propose(ev))
    except Exception:  # one broken rule must not hide the other causes
        if rule.name not in _failed_rules:
            _failed_rules.add(rule.name)
            log.warning("root-cause rule %s failed; skipping it", rule.name, exc_info=True)
        return []


def _to_root_cause(c: Candidate) -> RootCause:
    names: list[str] = []
    for s in (*c.primary, *c.explains):
        if s.name not in names:
            names.append(s.name)
    return RootCause(
        cause=c.cause,
        confidence=c.confidence,
        summary=c.summary,
        signals=tuple(names),
        subject=dict(c.subject),
        remediation=c.remediation,
    )
