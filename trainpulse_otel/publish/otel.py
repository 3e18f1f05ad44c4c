"""Publish the diagnosis back out as OTel metrics and events.

``trainpulse.health.score``, ``trainpulse.signal.active{signal,severity}`` and
``trainpulse.signal.subject{signal,severity,hostname,rank,gpu_index}`` (the active
signals' subjects: as many series as subjects, for alert routing) are observable
gauges over the latest diagnosis; raised/cleared signals and
changes of the top root cause are OTel events (log records with an event name).
These instruments are not in the measurement catalogue, so the diagnostic
reader ignores them: outputs never feed back into inputs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.metrics import CallbackOptions, Observation

from ..diagnose import VOCABULARY, Vocabulary
from ..diagnose.pipeline import PipelineResult
from ..diagnose.types import CRITICAL, SEVERITIES, Diagnosis, Goodput, Transition

log = logging.getLogger(__name__)

EVENT_RAISED = "trainpulse.signal.raised"
EVENT_CLEARED = "trainpulse.signal.cleared"
EVENT_ROOT_CAUSE = "trainpulse.root_cause"


#: Ranks of one signal's subject given a series each at most (a collective timeout may name thousands).
MAX_SUBJECT_RANKS = 16


def subject_labels(subject: Mapping[str, Any]) -> list[dict[str, str]]:
    """A signal's subject as metric labels: ``hostname``, ``rank``, ``gpu_index``, one label set per rank it names
    (at most :data:`MAX_SUBJECT_RANKS`); one empty set for a job-level signal."""
    base: dict[str, str] = {}
    host = subject.get("hostname")
    if isinstance(host, str):
        base["hostname"] = host
    if isinstance(subject.get("gpu_index"), int):
        base["gpu_index"] = str(subject["gpu_index"])
    ranks = [subject["rank"]] if isinstance(subject.get("rank"), int) else list(subject.get("ranks") or ())
    ranks = [r for r in ranks if isinstance(r, int)][:MAX_SUBJECT_RANKS]
    return [{**base, "rank": str(r)} for r in ranks] or [base]


class DiagnosisPublisher:
    """Holds the latest diagnosis for the output gauges and emits the events.

    Every signal of ``vocabulary`` (the built-ins' and the plugins' the pipeline was made with) has a
    ``signal.active`` series at each severity; every cause of it may have a ``root_cause.confidence``.
    """

    def __init__(
        self, meter: Any, logger: Any, namespace: str = "trainpulse", vocabulary: Vocabulary = VOCABULARY
    ) -> None:
        self._diagnosis = Diagnosis()
        self._scores: Mapping[str, float] = {}
        self._signal_names = vocabulary.signal_names
        self._causes = frozenset(vocabulary.cause_names)
        self._logger = logger
        meter.create_observable_gauge(
            f"{namespace}.health.score",
            callbacks=[self._observe_health],
            unit="1",
            description="Training health score, 0 (broken) to 100 (healthy).",
        )
        meter.create_observable_gauge(
            f"{namespace}.signal.active",
            callbacks=[self._observe_signals],
            unit="1",
            description="1 while the signal is active at this severity, 0 otherwise.",
        )
        meter.create_observable_gauge(
            f"{namespace}.signal.score",
            callbacks=[self._observe_scores],
            unit="1",
            description="Each signal's score at its detectors' latest judgement, the highest over its subjects: 1 "
            "at its warning threshold, more past it; 0 when judged fine. Absent until first judged.",
        )
        meter.create_observable_gauge(
            f"{namespace}.signal.subject",
            callbacks=[self._observe_subjects],
            unit="1",
            description="1 for each subject (host, rank, GPU) of an active signal; absent when none is active.",
        )
        meter.create_observable_gauge(
            f"{namespace}.root_cause.confidence",
            callbacks=[self._observe_causes],
            unit="1",
            description="Confidence of each root cause currently inferred, 0-1: once time is lost, the share of it "
            "the cause explains (0: a deeper cause explains it). Absent when not inferred.",
        )
        meter.create_observable_gauge(
            f"{namespace}.node.risk",
            callbacks=[self._observe_risks],
            unit="1",
            description="Each GPU's, port's and node's risk of interrupting the job, 0-1 (attribute component: "
            "gpu3, mlx5_0/1, node), from the evidence it shows; absent when none shows any.",
        )
        meter.create_observable_gauge(
            f"{namespace}.goodput.ratio",
            callbacks=[self._goodput_reading(lambda g: g.ratio)],
            unit="1",
            description="Productive time (steps x the ideal step) over wall time since the first training report.",
        )
        meter.create_observable_gauge(
            f"{namespace}.goodput.window_ratio",
            callbacks=[self._goodput_reading(lambda g: g.window_ratio)],
            unit="1",
            description="Productive time over wall time in the last 10 minutes.",
        )
        meter.create_observable_gauge(
            f"{namespace}.goodput.ideal_step_time",
            unit="s",
            callbacks=[self._goodput_reading(lambda g: g.ideal_step_time_ms / 1000.0)],
            description="The job's ideal step: its best sustained pace (lowest 31-step median, 30 minutes).",
        )
        meter.create_observable_gauge(
            f"{namespace}.job.ettr.ratio",
            callbacks=[self._job_reading("ettr")],
            unit="1",
            description="The job's ETTR across its attempts: productive time less the progress its restarts made it "
            "do again, over the wall time since its first attempt began, 0-1.",
        )
        meter.create_observable_counter(
            f"{namespace}.job.attempts",
            callbacks=[self._job_reading("attempts", len)],
            unit="{attempt}",
            description="The job's attempts so far: 1, and one more per restart seen.",
        )
        meter.create_observable_gauge(
            f"{namespace}.checkpoint.interval.recommended",
            callbacks=[self._job_reading("recommended_checkpoint_interval_s")],
            unit="s",
            description="Daly's checkpoint interval from the job's MTBF, save and restart costs; absent until an "
            "interruption and a save give them.",
        )
        meter.create_observable_counter(
            f"{namespace}.badput",
            callbacks=[self._observe_badput],
            unit="s",
            description="Wall time lost, in seconds, by the root cause it is attributed to (or unattributed).",
        )

    @property
    def diagnosis(self) -> Diagnosis:
        return self._diagnosis

    def publish(self, result: PipelineResult) -> None:
        """Make ``result`` the published diagnosis and emit its events."""
        self._diagnosis = result.diagnosis
        self._scores = result.scores
        for transition in result.transitions:
            self._emit_transition(transition)
        if result.top_cause_changed:
            self._emit_root_cause(result.diagnosis)

    def _observe_health(self, _options: CallbackOptions) -> Iterable[Observation]:
        health = self._diagnosis.health
        return [Observation(health.score, {"status": health.status})]

    def _observe_signals(self, _options: CallbackOptions) -> Iterable[Observation]:
        active = {}
        for signal in self._diagnosis.signals:
            if active.get(signal.name) != CRITICAL:
                active[signal.name] = signal.severity
        return [
            Observation(1 if active.get(name) == severity else 0, {"signal": name, "severity": severity})
            for name in self._signal_names
            for severity in SEVERITIES
        ]

    def _observe_scores(self, _options: CallbackOptions) -> Iterable[Observation]:
        scores = self._scores
        return [Observation(scores[name], {"signal": name}) for name in self._signal_names if name in scores]

    def _observe_subjects(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(1, {"signal": signal.name, "severity": signal.severity, **labels})
            for signal in self._diagnosis.signals
            for labels in subject_labels(signal.subject)
        ]

    def _observe_causes(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(cause.confidence, {"cause": cause.cause})
            for cause in self._diagnosis.root_causes
            if cause.cause in self._causes
        ]

    def _observe_risks(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(r.risk, {"component": r.component, **({"hostname": r.hostname} if r.hostname else {})})
            for r in self._diagnosis.node_risk
        ]

    def _goodput_reading(self, read: Callable[[Goodput], float]) -> Callable[[CallbackOptions], list[Observation]]:
        """A callback observing one figure of the goodput (nothing until the ideal step is known)."""

        def observe(_options: CallbackOptions) -> list[Observation]:
            goodput = self._diagnosis.goodput
            return [] if goodput is None else [Observation(read(goodput))]

        return observe

    def _job_reading(
        self, key: str, measure: Callable[[Any], float] = float
    ) -> Callable[[CallbackOptions], list[Observation]]:
        """A callback observing one figure of the goodput's ``job`` block (nothing while it has none)."""

        def observe(_options: CallbackOptions) -> list[Observation]:
            goodput = self._diagnosis.goodput
            job = None if goodput is None else goodput.job
            value = None if job is None else job.get(key)
            return [] if value is None else [Observation(measure(value))]

        return observe

    def _observe_badput(self, _options: CallbackOptions) -> Iterable[Observation]:
        goodput = self._diagnosis.goodput
        badput = goodput.badput_s if goodput is not None else {}
        return [Observation(seconds, {"cause": cause}) for cause, seconds in badput.items()]

    def _emit_transition(self, transition: Transition) -> None:
        raised = transition.event == "raised"
        severity = SeverityNumber.ERROR if transition.severity == CRITICAL else SeverityNumber.WARN
        self._emit(
            EVENT_RAISED if raised else EVENT_CLEARED,
            transition.ts,
            transition.message or f"{transition.signal} {transition.event}",
            severity if raised else SeverityNumber.INFO,
            {"signal": transition.signal, "severity": transition.severity, **_flatten("subject", transition.subject)},
        )

    def _emit_root_cause(self, diagnosis: Diagnosis) -> None:
        top = diagnosis.root_causes[0] if diagnosis.root_causes else None
        attrs: dict[str, Any] = {"cause": top.cause if top else "none"}
        if top is not None:
            attrs.update(confidence=top.confidence, signals=list(top.signals), remediation=top.remediation)
            attrs.update(_flatten("subject", top.subject))
        body = top.summary if top else "no root cause: the job looks healthy"
        self._emit(EVENT_ROOT_CAUSE, diagnosis.ts, body, SeverityNumber.WARN if top else SeverityNumber.INFO, attrs)

    def _emit(self, name: str, ts: float, body: str, severity: SeverityNumber, attrs: Mapping[str, Any]) -> None:
        try:
            self._logger.emit(
                event_name=name,
                timestamp=int(ts * 1e9),
                body=body,
                severity_number=severity,
                severity_text=severity.name,
                attributes={"event.name": name, **attrs},
            )
        except Exception:  # telemetry must never break the tick
            log.warning("emitting event %s failed", name, exc_info=True)


def _flatten(prefix: str, mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``{"rank": 5}`` → ``{"subject.rank": 5}``; lists stay lists (OTel allows homogeneous arrays)."""
    return {f"{prefix}.{k}": v for k, v in mapping.items() if isinstance(v, (str, int, float, bool, list, tuple))}
