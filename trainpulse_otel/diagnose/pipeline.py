"""The diagnostic pipeline: frame → detectors → signal state machine → root causes → health, node risk.

Pure: it is handed its detectors, root-cause rules and their vocabulary
(discovery happens in :mod:`trainpulse_otel.runtime`), reads frames and
returns findings. The clock is the frame timestamp, so a replayed trace gives
the same timeline every time. Incremental: each update looks only at the new
frame (every detector keeps its own statistics over its own horizon), so a
tick costs the same however long the job has run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..samples import Frame, LogEvent, LossPoint, TrainingSample
from .budget import BudgetBuilder, StepCounter
from .detectors.base import Detector
from .goodput import GoodputAccount
from .health import HealthScorer
from .joblife.life import JobLife
from .rank_budget import RankBudgets
from .relay import RELAY_POLICY, relayed_findings
from .risk import node_risks
from .rootcause import RootCauseRule, infer_root_causes, stragglers_sync_share, stragglers_wait_ms
from .spec import ROLE_STALL, ROLE_STRAGGLER
from .tick import TickBuilder
from .tracker import SignalTracker
from .types import CRITICAL, WARNING, Diagnosis, Finding, Goodput, RootCause, Signal, Transition
from .vocabulary import Vocabulary

log = logging.getLogger(__name__)

#: Root causes are re-inferred at least this often while signals are active (evidence moves).
CAUSE_REFRESH_S = 5.0


@dataclass(frozen=True)
class PipelineResult:
    """One update's outcome: the diagnosis now and what changed since the last one."""

    diagnosis: Diagnosis
    transitions: tuple[Transition, ...] = ()
    top_cause_changed: bool = False
    #: Each signal's score at its detectors' latest judgement (the highest over subjects; 0: judged and below
    #: the report floor), for a backend to threshold apart from the signal's own state. Absent: never judged.
    scores: Mapping[str, float] = field(default_factory=dict)


class DiagnosticPipeline:
    """Turns each new frame into a Diagnosis, with the given detectors and root-cause rules.

    ``vocabulary``: their checked declarations (discovery makes it once); by default made here from them.
    """

    def __init__(
        self,
        detectors: Sequence[Detector],
        rules: Sequence[RootCauseRule],
        vocabulary: Vocabulary | None = None,
        words_only: bool = False,
        mtbf_prior_s: float | None = None,
    ) -> None:
        self.detectors: tuple[Detector, ...] = tuple(detectors)
        self.rules: tuple[RootCauseRule, ...] = tuple(rules)
        self.vocabulary = vocabulary if vocabulary is not None else Vocabulary(self.detectors, self.rules)
        self._declared = [frozenset(spec.name for spec in d.signals) for d in self.detectors]
        owner = self.vocabulary.fact_owner
        self._provides = [frozenset(f for f, by in owner.items() if by == d.name) for d in self.detectors]
        self._undeclared_facts: set[str] = set()  # detectors already logged for a fact they did not declare
        self._layers = {name: spec.layer for name, spec in self.vocabulary.signals.items()}
        #: The signals whose roles the core plays (:data:`~.spec.ROLES`): None where no detector raises one.
        self._stall_signal = self.vocabulary.roles.get(ROLE_STALL)
        self._straggler_signal = self.vocabulary.roles.get(ROLE_STRAGGLER)
        #: The signals capped at a warning: the measured ones, when the job is judged from its own words alone.
        self._measured = (
            frozenset(name for name, spec in self.vocabulary.signals.items() if spec.measured)
            if words_only
            else frozenset()
        )
        self._due = [float("-inf")] * len(self.detectors)
        self._phases = _phases(self.detectors)
        self._ticks = TickBuilder()
        self._tracker = SignalTracker()
        self._health = HealthScorer(self.vocabulary.impacts)
        self._diagnosis = Diagnosis()
        self._causes: tuple[RootCause, ...] = ()
        self._causes_at = float("-inf")
        self._causes_samples = 0  # the rank budgets' samples the causes were worked out with
        self._top: tuple | None = None
        self._budget = BudgetBuilder()
        self._steps = StepCounter()
        self._goodput = GoodputAccount(self.vocabulary)
        self._ranks = RankBudgets()
        self._stalled = False  # training_stalled was raised since the last report
        self._scores: dict[str, float] = {}  # each signal's score at its latest judgement
        self._life = JobLife(mtbf_prior_s)  # the job's attempts across restarts, its checkpoints
        self._before_gap: dict[str, float] = {}  # the badput booked at the job's latest step
        #: Exceptions raised by each detector's update, by detector name.
        self.failures: dict[str, int] = {}
        self._undeclared: set[str] = set()  # detectors already logged for raising a signal they did not declare
        self._failed_rules: set[str] = set()  # rules already logged for failing or proposing outside their spec

    @property
    def diagnosis(self) -> Diagnosis:
        """The latest diagnosis (healthy before the first frame)."""
        return self._diagnosis

    def update(self, frame: Frame) -> PipelineResult:
        """Diagnose the job after ``frame``, the newest (frames come in time order)."""
        tick = self._ticks.next(frame)
        ts, tracker, due = tick.ts, self._tracker, self._due
        if self._phases is not None:  # the first frame: each periodic detector's first turn, staggered
            due[:], self._phases = [ts + phase for phase in self._phases], None
        for source, detector in enumerate(self.detectors):
            if ts < due[source]:
                continue
            if detector.every_s:
                due[source] = ts + detector.every_s
            try:
                findings = detector.update(tick)
                if findings:
                    findings = self._declared_only(source, findings)
                    if self._measured and not frame.gpus and frame.host is None and not frame.nodes:
                        findings = [_words_only(f) if f.signal in self._measured else f for f in findings]
                if findings is not None:
                    tracker.observe(source, findings, detector.policy, ts)
                    self._score(source, findings)
            except Exception:  # one broken detector (a plugin) must not blind the others
                if self._failed(detector) == 1:  # the first failure with its traceback, then quiet
                    log.warning(
                        "detector %s failed; its signals hold until it judges again", detector.name, exc_info=True
                    )
        if frame.nodes:  # the judging nodes' own verdicts (a job daemon's view)
            tracker.observe(len(self.detectors), relayed_findings(frame.nodes, self._layers), RELAY_POLICY, ts)
        tracker.expire(tick.ts)
        transitions = tracker.drain()
        signals = tracker.signals()
        top_before = self._top
        stalled = self._stall_signal is not None and any(s.name == self._stall_signal for s in signals)
        if stalled:
            self._stalled = True
            self._goodput.stall(ts)
        causes = self._root_causes(ts, signals, transitions)
        if stalled:
            self._goodput.attribute_stall(causes)
        health = self._health.update(ts, signals)
        if tick.report is not None:
            self._account(ts, tick.report, tick.all_reduce_ms, causes, signals)
            if causes and self._ranks.samples != self._causes_samples:  # one set of numbers: the causes' summaries
                causes = self._root_causes(ts, signals, transitions, refresh=True)  # read the budgets goodput reads
        self._observe_life(ts, tick.report, frame.events, tick.losses)
        self._diagnosis = Diagnosis(
            ts=ts,
            health=health,
            signals=signals,
            root_causes=causes,
            goodput=self._with_life(self._goodput.goodput(ts, self._ranks.worst())),
            node_risk=node_risks(signals, frame.xid_counts) if signals or frame.xid_counts else (),
        )
        return PipelineResult(self._diagnosis, transitions, self._top != top_before, dict(self._scores))

    def _observe_life(
        self, ts: float, report: TrainingSample | None, events: Sequence[LogEvent], points: Sequence[LossPoint]
    ) -> None:
        """The job's life this tick; a restart's gap and re-done steps go to their badput (:mod:`.joblife`)."""
        current = self._life.attempts.current
        last = None if current is None else current.last_step
        began = self._life.observe(ts, report, events, points)
        if began is not None:
            self._goodput.book_restart(self._before_gap, began.lost_progress_s, began.checkpoint_load_s)
        if report is not None and report.global_step is not None and (began is not None or report.global_step != last):
            self._before_gap = self._goodput.booked_now()  # the job stepped: a later gap is booked from here

    def life_state(self) -> dict[str, Any]:
        """The job's life and the goodput it is measured by, as plain data: what a daemon keeps across its own
        restarts (:meth:`restore_life`)."""
        return {
            "life": self._life.to_state(),
            "goodput": self._goodput.to_state(),
            "last_step": self._steps.last,
            "before_gap": dict(self._before_gap),
        }

    def restore_life(self, state: Mapping[str, Any]) -> None:
        """Continue the life :meth:`life_state` saved (before the first frame): the attempts, what was booked,
        the ideal step, the step counted to; ValueError, with nothing changed, when ``state`` does not hold one."""
        life, goodput = JobLife(self._life.mtbf_prior_s), GoodputAccount(self.vocabulary)
        life.restore(state.get("life"))
        goodput.restore(state.get("goodput"))
        last_step, before = state.get("last_step"), state.get("before_gap", {})
        if not isinstance(last_step, (int, type(None))) or isinstance(last_step, bool):
            raise ValueError("'last_step' is not a step")
        if not isinstance(before, dict) or not all(isinstance(v, (int, float)) for v in before.values()):
            raise ValueError("'before_gap' is not seconds by cause")
        self._life, self._goodput, self._before_gap = life, goodput, {str(k): float(v) for k, v in before.items()}
        self._steps.resume(last_step)
        ideal, frontier = goodput.ideal_ms, goodput.ledger.frontier
        if ideal is not None and frontier is not None:  # the budget books by the ideal at once, as before
            self._budget.ideal.seed(frontier, ideal)

    def _with_life(self, goodput: Goodput | None) -> Goodput | None:
        """The goodput with its ``job`` block (the life's ETTR is the goodput ledger's productive share)."""
        if goodput is None or goodput.wall_s is None:
            return goodput
        job = self._life.block(goodput.ratio * goodput.wall_s, goodput.wall_s)
        return goodput if job is None else replace(goodput, job=job)

    def _score(self, source: int, findings: list[Finding]) -> None:
        """The scores of a detector's latest judgement, per signal it declares (its highest finding's, or 0)."""
        for name in self._declared[source]:
            self._scores[name] = max((f.score for f in findings if f.signal == name), default=0.0)

    def _account(
        self,
        ts: float,
        report: TrainingSample,
        all_reduce: float | None,
        causes: tuple[RootCause, ...],
        signals: tuple[Signal, ...],
    ) -> None:
        """The new report's step into the budget (``all_reduce``: its all-reduce time, the tick's), and the
        budget into goodput."""
        steps = self._steps.advance(report)
        stragglers = [s for s in signals if s.name == self._straggler_signal]
        budget = self._budget.add(
            ts, report, steps, stalled=self._stalled, all_reduce=all_reduce, known_wait=stragglers_wait_ms(stragglers)
        )
        self._ranks.add(ts, report, budget, stalled=self._stalled)
        self._stalled = False
        straggler_share = stragglers_sync_share(stragglers)
        self._goodput.add(ts, report, budget, self._budget.ideal_ms, causes, straggler_share, steps)

    def _declared_only(self, source: int, findings: list[Finding]) -> list[Finding]:
        """A detector's findings of the signals it declared; one of another signal is dropped (logged once)."""
        declared = self._declared[source]
        if all(f.signal in declared for f in findings):
            return findings
        detector = self.detectors[source]
        if detector.name not in self._undeclared:
            self._undeclared.add(detector.name)
            names = sorted({f.signal for f in findings} - declared)
            log.warning("detector %s raised undeclared signal(s) %s; dropped", detector.name, ", ".join(names))
        return [f for f in findings if f.signal in declared]

    def _failed(self, detector: Detector) -> int:
        """Count a detector's failure; return how many it has had so far."""
        name = detector.name
        self.failures[name] = self.failures.get(name, 0) + 1
        return self.failures[name]

    def _root_causes(
        self, ts: float, signals: tuple[Signal, ...], transitions: tuple[Transition, ...], refresh: bool = False
    ) -> tuple[RootCause, ...]:
        if not signals:
            self._causes, self._top = (), None
        elif refresh or transitions or not self._causes or ts - self._causes_at >= CAUSE_REFRESH_S:
            self._causes_samples = self._ranks.samples
            self._causes = infer_root_causes(
                signals,
                self.facts(),
                self._ticks.node,
                ts,
                self.rules,
                self.vocabulary,
                self._goodput.recent_losses(ts),
                self._ranks,
                self._failed_rules,
            )
            self._causes_at = ts
            self._top = _top(self._causes)
        return self._causes

    def facts(self) -> dict[str, Any]:
        """Every detector's latest declared facts (``provides``), by name; an undeclared one is dropped, logged once."""
        merged: dict[str, Any] = {}
        for detector, provides in zip(self.detectors, self._provides, strict=True):
            for name, value in detector.facts().items():
                if name in provides:
                    merged[name] = value
                elif detector.name not in self._undeclared_facts:
                    self._undeclared_facts.add(detector.name)
                    log.warning("detector %s returned fact %r, which it does not declare: dropped", detector.name, name)
        return merged


def _words_only(finding: Finding) -> Finding:
    """A measured signal's finding from the job's words alone (no GPU or host reading beside them): at most a
    warning (:attr:`SignalSpec.measured`)."""
    if finding.severity != CRITICAL:
        return finding
    return replace(finding, severity=WARNING, evidence={**finding.evidence, "judged_from": "the job's own figures"})


def _phases(detectors: Sequence[Detector]) -> list[float]:
    """Each detector's first turn after the first frame: every other detector of the same period half a period
    late, so their turns alternate instead of landing on one tick (at 512 GPUs the five 2-second detectors
    together made every other tick of a job daemon take 2-3x the rest)."""
    seen: dict[float, int] = {}
    phases = []
    for detector in detectors:
        period = detector.every_s
        order = seen[period] = seen.get(period, -1) + 1
        phases.append(period / 2 if period and order % 2 else 0.0)
    return phases


def _top(causes: tuple[RootCause, ...]) -> tuple | None:
    if not causes:
        return None
    top = causes[0]
    return top.cause, repr(sorted(top.subject.items()))
