"""Root-cause inference: the causes, ranked by the share of lost time each explains.

Each rule looks at the active signals and the cross-layer :class:`Evidence`
and proposes candidates: a cause, the signals that are its direct evidence
(*primary*), the signals it accounts for as consequences (*explains*), a
subject, a summary with the numbers, and what to do.

The step-time budget (:mod:`..budget`) says how much of the recent wall time
each component lost. A candidate claims the components its own signals
measure (their :class:`~..spec.SignalSpec` ``component``), and those of the
consequences whose time follows their cause (``explainer_claims``: the wait for
a straggler it makes late, the stall of a rank it hangs); its confidence is the
share of the lost time those hold — where two causes make up one component,
each its fraction (``Candidate.shares``). Until the job has lost
``MIN_LOST_SHARE`` of its recent time, or for a cause seen only through
forecasts, or for one none of whose signals measures lost step time (a loss
spike that recovers), the confidence is the strength of its evidence instead.
A candidate whose primary signal another explains ends at least
``BELOW_EXPLAINER`` below it, its evidence naming them (``explained_by``);
equal confidence is broken by the causes' layer, deepest first
(:mod:`..vocabulary`). Worked examples: docs/signals.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..correlate import Evidence
from ..rank_budget import RankBudgets
from ..spec import CauseSpec
from ..tick import NodeState
from ..types import RootCause, Signal
from ..vocabulary import Vocabulary

log = logging.getLogger(__name__)

MAX_CONFIDENCE = 0.95
#: Evidence strength each consequence a cause explains adds.
PER_EXPLAINED = 0.05
BELOW_EXPLAINER = 0.10
MAX_CAUSES = 6
#: Below this share of recent wall time lost, the job has lost nothing measurable yet: causes rank by evidence.
MIN_LOST_SHARE = 0.02


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
    #: The fraction of a claimed component's lost time this cause explains where another cause explains the
    #: rest (a straggler among ranks that also scatter: the sync wait it adds, and the others' own); else all.
    shares: dict[str, float] = field(default_factory=dict)
    confidence: float = 0.0
    #: What the cause itself found beyond its signals' evidence (``rank_hang``: the ranks grouped by stack).
    evidence: dict[str, Any] = field(default_factory=dict)
    #: The deeper causes that explain this one's own evidence (a throttled GPU's straggler): set by ranking.
    explained_by: tuple[str, ...] = ()

    def claims(self, vocabulary: Vocabulary) -> set[str]:
        """The budget components whose lost time this cause explains: those its own signals measure, and those
        of the consequences whose time follows their cause (a deeper cause explains the symptoms it produces)."""
        component_of = vocabulary.component_of
        evidence = self.primary or self.explains  # a cause seen only through its effects (a power cap) claims those
        claimed = {component_of[s.name] for s in evidence if s.name in component_of}
        claimed.update(component_of[s.name] for s in self.explains if s.name in vocabulary.explainer_claims)
        return claimed

    def forecast_only(self, vocabulary: Vocabulary) -> bool:
        """True when every signal of this cause's own evidence is a forecast (nothing lost yet)."""
        evidence = self.primary or self.explains
        return bool(evidence) and all(s.name in vocabulary.predictive for s in evidence)


@runtime_checkable
class RootCauseRule(Protocol):
    """Proposes candidate causes from the active signals and the cross-layer evidence.

    Rules are plugins (the ``trainpulse.root_causes`` entry-point group), so a
    plugin detector's signal can become a cause. ``residual`` rules run after
    the others and see, in ``evidence.explained``, which signals those already
    account for: they propose only for what is left.
    """

    spec: CauseSpec
    residual: bool

    @property
    def name(self) -> str: ...

    def propose(self, evidence: Evidence) -> list[Candidate]: ...


@dataclass(frozen=True)
class Rule:
    """A rule made of a function: how the built-ins are written."""

    spec: CauseSpec
    proposer: Callable[[Evidence], list[Candidate]]
    residual: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    def propose(self, evidence: Evidence) -> list[Candidate]:
        return self.proposer(evidence)


def rank_candidates(
    candidates: list[Candidate], vocabulary: Vocabulary, losses: Mapping[str, float] | None = None
) -> list[Candidate]:
    """Score, demote the consequences below what explains them, and sort.

    Once the job has measurably lost time (``losses``: each budget component's recent lost share of wall time,
    together at least ``MIN_LOST_SHARE``), a cause's confidence is the share of that lost time it explains, and a
    consequence of a deeper cause explains only what that cause does not (a throttled GPU's straggler adds no
    time of its own); before, the confidence is the strength of its own evidence.
    """
    explainers: dict[int, list[Candidate]] = {}
    for c in candidates:
        c.base = min(MAX_CONFIDENCE, c.base + PER_EXPLAINED * len({id(s) for s in c.explains}))
        for s in c.explains:
            explainers.setdefault(id(s), []).append(c)
    for c in candidates:  # a deeper cause explains of a shared component what its consequence does, no more
        for o in {id(o): o for s in c.primary for o in explainers.get(id(s), ())}.values():
            for component, share in c.shares.items():
                o.shares.setdefault(component, share)
    deeper = {id(c): [o for s in c.primary for o in explainers.get(id(s), ()) if o is not c] for c in candidates}
    lost = sum((losses or {}).values())
    measured = losses is not None and lost >= MIN_LOST_SHARE
    for c in candidates:
        own = c.claims(vocabulary)
        if measured and own and not c.forecast_only(vocabulary):
            taken = {k for o in deeper[id(c)] for k in o.claims(vocabulary)}
            claimed = own - taken
            c.confidence = sum(losses.get(k, 0.0) * c.shares.get(k, 1.0) for k in claimed) / lost
        else:  # before time is lost, or a cause none of whose signals measures lost step time (a spike that recovers)
            c.confidence = c.base
    for c in candidates:
        if deeper[id(c)]:
            c.explained_by = tuple(sorted({o.cause for o in deeper[id(c)]}))
            top = max(o.confidence for o in deeper[id(c)])
            c.confidence = max(0.0, min(c.confidence, top - BELOW_EXPLAINER))
    last = len(vocabulary.tie_rank)
    return sorted(candidates, key=lambda c: (-round(c.confidence, 2), -c.base, vocabulary.tie_rank.get(c.cause, last)))


def infer_root_causes(
    signals: tuple[Signal, ...],
    facts: Mapping[str, Any],
    node: NodeState,
    ts: float,
    rules: Sequence[RootCauseRule],
    vocabulary: Vocabulary,
    losses: Mapping[str, float] | None = None,
    ranks: RankBudgets | None = None,
    failed: set[str] | None = None,
) -> tuple[RootCause, ...]:
    """The ranked root causes for the active signals (empty when none are active); ``ranks``: each rank's
    recent step budget, for the rules that say what a rank's lateness is made of; ``failed``: the rules already
    logged for failing (the caller's, so each pipeline says it once)."""
    failed = set() if failed is None else failed
    if not signals:
        return ()
    ev = Evidence(signals, facts, node, ts, ranks)
    candidates = [c for rule in rules if not rule.residual for c in _proposals(rule, ev, failed)]
    ev.explained = frozenset(id(s) for c in candidates for s in c.explains)
    ev.unclaimed = _unclaimed(candidates, losses or {}, vocabulary)
    candidates += [c for rule in rules if rule.residual for c in _proposals(rule, ev, failed)]
    ranked = rank_candidates(candidates, vocabulary, losses)[:MAX_CAUSES]
    return tuple(_to_root_cause(c) for c in ranked)


def _unclaimed(candidates: list[Candidate], losses: Mapping[str, float], vocabulary: Vocabulary) -> frozenset[str]:
    """Budget components that lost a measurable share of recent time that no candidate claims: a wait cause
    that "explains" idle GPUs cannot explain slower compute, so the residual rule looks at compute again."""
    lost = sum(losses.values())
    if lost < MIN_LOST_SHARE:
        return frozenset()
    claimed = {k for c in candidates for k in c.claims(vocabulary)}
    return frozenset(k for k, share in losses.items() if k not in claimed and share >= MIN_LOST_SHARE / 2)


def _proposals(rule: RootCauseRule, ev: Evidence, failed: set[str]) -> list[Candidate]:
    """What one rule proposes of its own cause, from the signals its spec explains; a failing rule (a plugin's
    bug) proposes nothing, a candidate outside its spec is dropped; either is logged once (``failed``: the rules
    already logged)."""
    try:
        proposed = list(rule.propose(ev))
    except Exception:  # one broken rule must not hide the other causes
        if rule.name not in failed:
            failed.add(rule.name)
            log.warning("root-cause rule %s failed; skipping it", rule.name, exc_info=True)
        return []
    spec = rule.spec
    fits = [
        c
        for c in proposed
        if c.cause == spec.name and {s.name for s in (*c.primary, *c.explains)} <= set(spec.explains)
    ]
    if len(fits) < len(proposed) and rule.name not in failed:
        failed.add(rule.name)
        log.warning("root-cause rule %s proposed a cause or signals its CauseSpec does not declare; dropped", rule.name)
    return fits


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
        evidence={**c.evidence, "explained_by": list(c.explained_by)} if c.explained_by else dict(c.evidence),
    )
