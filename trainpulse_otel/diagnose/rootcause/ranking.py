"""Root-cause inference: the contract's causes, ranked, deepest explanation first.

Each rule looks at the active signals and the cross-layer :class:`Evidence`
and proposes candidates: a cause, the signals that are its direct evidence
(*primary*), the signals it accounts for as consequences (*explains*), a
subject, a summary with the numbers, and what to do.

Ranking by the lost time each cause explains. The step-time budget
(:mod:`..budget`) says how much of the recent wall time (a leaky sum over ~2
minutes) each component lost: data, tokenizer, sync, all-reduce,
checkpoint, bubble, compute, and the stall. A candidate claims the components its own
signals measure (:data:`COMPONENT_OF_SIGNAL`), and the sync wait of a
straggler it makes late; its confidence is the share of the lost time those
components hold. So a wait every rank pays equally is not imbalance (the
sync wait did not grow; the all-reduce did), tokenization inside the loader's
wait explains that part of it, and two faults at once each get their share;
where two causes make up one component (a straggler among ranks whose work also
varies: the wait it adds, and the wait the others' scatter alone would cause),
each claims its fraction of it (``Candidate.shares``), and a deeper cause behind
one of them (a throttled GPU behind the straggler) claims that one's fraction.
Until the job has lost ``MIN_LOST_SHARE`` of its recent time (a forecast, a
fault too new, a mis-configuration it had from the start), the confidence is
the strength of the evidence instead: 0.6 for a warning, 0.75 for a critical
signal or a confirming cross-layer check, up to 0.85, plus 0.05 per
consequence explained, at most 0.95. A forecast (``PREDICTIVE``: memory or
temperature heading for its limit, a GPU's memory degrading) has lost
nothing yet, so a cause seen only through forecasts is always ranked by
that strength of evidence: beside a measured fault it stands where its
evidence puts it, not at zero. Either way a candidate whose primary
signal another explains is that one's consequence and ends at least 0.1
below it: a throttled GPU that makes its rank a straggler is
``gpu_thermal_throttling`` first and ``straggler_rank`` second. Padding that
accounts for low MFU means ``compute_inefficiency`` is not proposed at all,
since that cause is only inferred for what nothing else explains.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..correlate import Evidence
from ..rank_budget import RankBudgets
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
    "node_failure",
    "gpu_hardware_failure",
    "gpu_thermal_throttling",
    "gpu_power_throttling",
    "gpu_memory_pressure",
    "host_memory_pressure",
    "rank_hang",
    "straggler_rank",
    "load_imbalance",
    "input_pipeline_bound",
    "tokenizer_bound",
    "communication_bound",
    "checkpoint_io_bound",
    "pipeline_bubbles",
    "padding_waste",
    "compute_inefficiency",
    "numerical_instability",
)
_TIE_RANK = {cause: i for i, cause in enumerate(TIE_ORDER)}
#: Below this share of recent wall time lost, the job has lost nothing measurable yet: causes rank by evidence.
MIN_LOST_SHARE = 0.02
#: The step-budget component (:mod:`..budget`) whose lost time each signal is evidence of.
COMPONENT_OF_SIGNAL: Mapping[str, str] = {
    "dataloader_starvation": "data",
    "tokenizer_stall": "tokenizer",
    "allreduce_wait": "all_reduce",
    "checkpoint_stall": "checkpoint",
    "pipeline_bubble": "bubble",
    "sync_imbalance": "sync",
    "rank_straggler": "sync",
    "throughput_collapse": "compute",
    "gpu_underutilization": "compute",
    "low_mfu": "compute",
    "thermal_instability": "compute",
    "thermal_throttle_risk": "compute",
    "memory_pressure": "compute",
    "oom_risk": "compute",
    "sequence_padding": "compute",
    "gpu_hardware_fault": "compute",
    "gpu_memory_degradation": "compute",
    "nonfinite_loss": "numerics",  # steps after the loss went non-finite train nothing (goodput books them)
    "training_stalled": "stall",
    "node_unreachable": "stall",  # a silent node's ranks train nothing; the stall they cause is its
}
#: Forecasts: signals about time not lost yet.
PREDICTIVE = frozenset({"oom_risk", "thermal_throttle_risk", "gpu_memory_degradation"})
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
    #: The fraction of a claimed component's lost time this cause explains where another cause explains the
    #: rest (a straggler among ranks that also scatter: the sync wait it adds, and the others' own); else all.
    shares: dict[str, float] = field(default_factory=dict)
    confidence: float = 0.0

    def claims(self) -> set[str]:
        """The budget components whose lost time this cause explains: those its own signals measure, and the
        wait for a straggler it makes late or the stall of a rank it hangs (a deeper cause explains the symptoms
        it produces)."""
        evidence = self.primary or self.explains  # a cause seen only through its effects (a power cap) claims those
        claimed = {COMPONENT_OF_SIGNAL[s.name] for s in evidence if s.name in COMPONENT_OF_SIGNAL}
        if any(s.name == "rank_straggler" for s in self.explains):
            claimed.add("sync")
        if any(s.name == "training_stalled" for s in self.explains):
            claimed.add("stall")  # a deeper cause of the stall (a failing GPU) claims its lost time
        return claimed

    def forecast_only(self) -> bool:
        """True when every signal of this cause's own evidence is a forecast (nothing lost yet)."""
        evidence = self.primary or self.explains
        return bool(evidence) and all(s.name in PREDICTIVE for s in evidence)


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


#: How widely the other ranks scatter (a relative sigma of their lateness) for the work per rank to vary on
#: its own: across 8 ranks the last one then arrives ~14 % of a step after the median, which alone is
#: ``sync_imbalance``'s 10 % warning.
IMBALANCE_SCATTER = 0.10


def explain_whole_sync(stragglers: Sequence[Signal]) -> bool:
    """Whether these stragglers are all of the ranks' wait for slower peers.

    A straggler among ranks that otherwise agree tightly is the whole wait. When the other ranks also
    scatter widely step to step (``rank_straggler``'s ``others_scatter``), the work per rank varies too:
    fixing the straggler leaves part of the wait (:func:`.ranks.sync_share`), so both causes are there.
    """
    return bool(stragglers) and all(s.evidence.get("others_scatter", 0.0) < IMBALANCE_SCATTER for s in stragglers)


def symptoms(ev: Evidence, *names: str) -> list[Signal]:
    """The active job-wide symptom signals among ``names`` (all SYMPTOMS by default).

    ``sync_imbalance`` is left out while stragglers stand among ranks that also scatter (not
    :func:`explain_whole_sync`): that wait is then the stragglers' part and ``load_imbalance``'s, so no cause
    explains it whole; a cause explains the part the stragglers it explains add (their ``shares``)."""
    stragglers = ev.active("rank_straggler")
    split = bool(stragglers) and not explain_whole_sync(stragglers)
    wanted = [n for n in names or SYMPTOMS if not (split and n == "sync_imbalance")]
    return [s for s in map(ev.job_signal, wanted) if s is not None]


def pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.0f}%"


def rank_candidates(candidates: list[Candidate], losses: Mapping[str, float] | None = None) -> list[Candidate]:
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
        if measured and not c.forecast_only():
            taken = {k for o in deeper[id(c)] for k in o.claims()}
            c.confidence = sum(losses.get(k, 0.0) * c.shares.get(k, 1.0) for k in c.claims() - taken) / lost
        else:
            c.confidence = c.base
    for c in candidates:
        if deeper[id(c)]:
            top = max(o.confidence for o in deeper[id(c)])
            c.confidence = max(0.0, min(c.confidence, top - BELOW_EXPLAINER))
    return sorted(candidates, key=lambda c: (-round(c.confidence, 2), -c.base, _TIE_RANK.get(c.cause, len(TIE_ORDER))))


def infer_root_causes(
    signals: tuple[Signal, ...],
    facts: Mapping[str, Any],
    node: NodeState,
    ts: float,
    rules: Sequence[RootCauseRule],
    losses: Mapping[str, float] | None = None,
    ranks: RankBudgets | None = None,
) -> tuple[RootCause, ...]:
    """The ranked root causes for the active signals (empty when none are active); ``ranks``: each rank's
    recent step budget, for the rules that say what a rank's lateness is made of."""
    if not signals:
        return ()
    ev = Evidence(signals, facts, node, ts, ranks)
    candidates = [c for rule in rules if not rule.residual for c in _proposals(rule, ev)]
    ev.explained = frozenset(id(s) for c in candidates for s in c.explains)
    ev.unclaimed = _unclaimed(candidates, losses or {})
    candidates += [c for rule in rules if rule.residual for c in _proposals(rule, ev)]
    ranked = rank_candidates(candidates, losses)[:MAX_CAUSES]
    return tuple(_to_root_cause(c) for c in ranked)


def _unclaimed(candidates: list[Candidate], losses: Mapping[str, float]) -> frozenset[str]:
    """Budget components that lost a measurable share of recent time that no candidate claims: a wait cause
    that "explains" idle GPUs cannot explain slower compute, so the residual rule looks at compute again."""
    lost = sum(losses.values())
    if lost < MIN_LOST_SHARE:
        return frozenset()
    claimed = {k for c in candidates for k in c.claims()}
    return frozenset(k for k, share in losses.items() if k not in claimed and share >= MIN_LOST_SHARE / 2)


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
