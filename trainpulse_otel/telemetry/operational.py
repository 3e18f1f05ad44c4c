"""The daemon's own instruments: what it ingested, what it refused, how long steps and ticks took.

Real counters and histograms (synchronous instruments), so OTLP temporality
matters for them: with the Datadog profile they are exported as deltas.
Accepted reports are counted in a plain queue on the request thread and added
to the counter once per tick (:meth:`OperationalMetrics.flush`), one add per
attribute set. A report's step time goes into the histogram at once, on the
request thread: a histogram has no batch API, and a tick's worth of records
in one go held up every request in flight during that tick
(docs/performance.md, "Ingest"). They are not in the measurement catalogue,
so the diagnostic reader ignores them — the daemon's bookkeeping never feeds
the diagnosis.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from ..samples import TrainingSample, heartbeats_only
from .conversion import training_attributes

REST, FRAMEWORK, SDK = "rest", "framework", "sdk"
INGEST_SOURCES = (REST, FRAMEWORK, SDK)

#: Accepted reports noted between two flushes at most (a flush runs every tick).
PENDING_LIMIT = 100_000
#: Step times run from ~10 ms (small models) to minutes (huge pipelines, checkpoints).
STEP_DURATION_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: A tick is collection + one frame + diagnosis: sub-millisecond to around a second.
TICK_DURATION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True)
class OperationalSpec:
    """One operational instrument: its name suffix, kind, unit, attributes and meaning (docs are checked against it)."""

    suffix: str
    kind: str  # "counter" | "histogram"
    unit: str
    attributes: tuple[str, ...]
    description: str


INGEST_SAMPLES = OperationalSpec(
    "ingest.samples",
    "counter",
    "{sample}",
    ("source", "framework"),
    "Training reports accepted (REST, framework adapters, SDK), by source and framework.",
)
#: What a noted report of heartbeats alone is counted under (no framework is named this).
HEARTBEATS = "\0heartbeats"
INGEST_HEARTBEATS = OperationalSpec(
    "ingest.heartbeats",
    "counter",
    "{report}",
    ("source",),
    "Reports that carried only rank heartbeats (no step measured), by source; not counted in ingest.samples.",
)
INGEST_ERRORS = OperationalSpec(
    "ingest.errors",
    "counter",
    "{error}",
    ("reason",),
    "Ingest requests refused, by reason (invalid_field, malformed, too_large, unsupported_media_type, …).",
)
STEP_DURATION = OperationalSpec(
    "training.step_duration", "histogram", "s", ("model", "framework"), "Distribution of reported optimizer step times."
)
TICK_DURATION = OperationalSpec(
    "tick.duration", "histogram", "s", (), "Time one tick took: collection, frame, diagnosis and publishing."
)
COLLECTOR_ERRORS = OperationalSpec(
    "collector.errors",
    "counter",
    "{error}",
    ("collector",),
    "Collections that raised and were skipped for that tick, by collector.",
)
OTLP_POINTS = OperationalSpec(
    "otlp.points",
    "counter",
    "{point}",
    ("outcome",),
    "OTLP data points received (POST /v1/metrics, gRPC), by outcome: accepted, rejected, ignored.",
)
#: ``outcome`` of an OTLP point: taken; refused (counted in the answer's partial_success); not a metric TrainPulse reads.
OTLP_OUTCOMES = ("accepted", "rejected", "ignored")
OTLP_LOG_RECORDS = OperationalSpec(
    "otlp.log_records",
    "counter",
    "{record}",
    ("outcome",),
    "OTLP log records received (POST /v1/logs, gRPC), by outcome: accepted (read as lines), rejected, ignored.",
)
#: ``source`` of a log line: a file ``-follow`` reads; a record of an OTLP logs export (``POST /v1/logs``, gRPC).
FOLLOW, OTLP = "follow", "otlp"
LOG_LINES = OperationalSpec(
    "logs.lines",
    "counter",
    "{line}",
    ("source", "outcome"),
    "Console lines read, by source (follow, otlp) and outcome: understood (a parser knew it), unknown (none did).",
)
LOG_RECORDS = OperationalSpec(
    "logs.records",
    "counter",
    "{record}",
    ("source", "kind"),
    "What the lines read became, by source and kind: report (a training report), event (a failure event).",
)
#: ``outcome`` of an action (docs/actions.md): ran (ok, failed, timeout), or not (dropped, dry_run, cooldown).
ACTION_OUTCOMES = ("ok", "failed", "timeout", "dropped", "dry_run", "cooldown")
ACTIONS = OperationalSpec(
    "actions",
    "counter",
    "{run}",
    ("action", "outcome"),
    "Actions on a raised signal, by action name and outcome: ok, failed, timeout, dropped, dry_run, cooldown.",
)
OPERATIONAL: tuple[OperationalSpec, ...] = (
    INGEST_SAMPLES,
    INGEST_HEARTBEATS,
    INGEST_ERRORS,
    OTLP_POINTS,
    OTLP_LOG_RECORDS,
    STEP_DURATION,
    TICK_DURATION,
    COLLECTOR_ERRORS,
    LOG_LINES,
    LOG_RECORDS,
    ACTIONS,
)


class OperationalMetrics:
    """The daemon's counters and histograms on TrainPulse's meter."""

    def __init__(self, meter: Any, namespace: str = "trainpulse") -> None:
        def create(spec: OperationalSpec, **advice: Any) -> Any:
            make = meter.create_counter if spec.kind == "counter" else meter.create_histogram
            return make(f"{namespace}.{spec.suffix}", unit=spec.unit, description=spec.description, **advice)

        self._samples = create(INGEST_SAMPLES)
        self._heartbeats = create(INGEST_HEARTBEATS)
        self._errors = create(INGEST_ERRORS)
        self._otlp_points = create(OTLP_POINTS)
        self._otlp_log_records = create(OTLP_LOG_RECORDS)
        self._step = create(STEP_DURATION, explicit_bucket_boundaries_advisory=STEP_DURATION_BUCKETS_S)
        self._tick = create(TICK_DURATION, explicit_bucket_boundaries_advisory=TICK_DURATION_BUCKETS_S)
        self._collector_errors = create(COLLECTOR_ERRORS)
        self._log_lines = create(LOG_LINES)
        self._log_records = create(LOG_RECORDS)
        self._actions = create(ACTIONS)
        # Bounded: if ticks ever stopped, memory would not grow (the oldest notes go first).
        self._pending: deque[tuple[str, str | None]] = deque(maxlen=PENDING_LIMIT)
        self._otlp_pending: deque[tuple[int, int, int]] = deque(maxlen=PENDING_LIMIT)
        self._job_attributes: dict[tuple[str | None, str | None], dict[str, str]] = {}

    def ingested(self, sample: TrainingSample, source: str = REST) -> None:
        """Note one accepted training report: its step time now, its count at the next flush (a report of rank
        heartbeats alone is counted apart: it measured no step)."""
        if heartbeats_only(sample):
            self._pending.append((source, HEARTBEATS))
            return
        self._pending.append((source, sample.framework))
        if sample.step_time_ms is not None:
            self._step.record(sample.step_time_ms / 1000.0, self._job(sample.model_name, sample.framework))

    def flush(self) -> None:
        """Count the reports and OTLP points noted since the last flush: one counter add per attribute set.

        Safe from any thread: each noted report is taken off the queue exactly once.
        """
        counts: Counter[tuple[str, str | None]] = Counter()
        while self._pending:
            try:
                counts[self._pending.popleft()] += 1
            except IndexError:  # another thread flushed the last one
                break
        for (source, framework), n in counts.items():
            if framework == HEARTBEATS:
                self._heartbeats.add(n, {"source": source})
            else:
                self._samples.add(n, {"source": source, **({"framework": framework} if framework else {})})
        points = [0, 0, 0]
        while self._otlp_pending:
            try:
                request = self._otlp_pending.popleft()
            except IndexError:
                break
            points = [total + n for total, n in zip(points, request, strict=True)]
        for outcome, n in zip(OTLP_OUTCOMES, points, strict=True):
            if n:
                self._otlp_points.add(n, {"outcome": outcome})

    def _job(self, model: str | None, framework: str | None) -> dict[str, str]:
        key = (model, framework)
        attrs = self._job_attributes.get(key)
        if attrs is None:
            attrs = training_attributes(TrainingSample(model_name=model, framework=framework))
            if len(self._job_attributes) < 1024:  # a handful of jobs per daemon; never unbounded
                self._job_attributes[key] = attrs
        return attrs

    def rejected(self, reason: str) -> None:
        """Count one refused ingest request."""
        self._errors.add(1, {"reason": reason})

    def otlp_received(self, accepted: int, rejected: int, ignored: int) -> None:
        """Note the points of one OTLP request by outcome, counted at the next flush (the next tick: a 64-node
        job sends 64 requests a second, and an SDK counter add costs as much as the rest of the note)."""
        self._otlp_pending.append((accepted, rejected, ignored))

    def otlp_logs_received(self, accepted: int, rejected: int, ignored: int = 0) -> None:
        """Count the log records of one OTLP request by outcome, at once: a shipper batches its lines (a request a
        second per node), so these adds are few beside the metrics' points."""
        for outcome, n in zip(OTLP_OUTCOMES, (accepted, rejected, ignored), strict=True):
            if n:
                self._otlp_log_records.add(n, {"outcome": outcome})

    def ticked(self, seconds: float) -> None:
        """Record how long one tick took."""
        self._tick.record(seconds)

    def collector_failed(self, collector: str) -> None:
        """Count one collection that raised."""
        self._collector_errors.add(1, {"collector": collector})

    def logs_read(self, lines: int, unknown: int, reports: int, events: int, source: str = FOLLOW) -> None:
        """Count what one collection of log lines read (on the tick's thread: a few adds a tick)."""
        for outcome, n in (("understood", lines - unknown), ("unknown", unknown)):
            if n:
                self._log_lines.add(n, {"source": source, "outcome": outcome})
        for kind, n in (("report", reports), ("event", events)):
            if n:
                self._log_records.add(n, {"source": source, "kind": kind})

    def action_done(self, action: str, outcome: str) -> None:
        """Count one action's outcome (from the actions' worker thread, or the tick's)."""
        self._actions.add(1, {"action": action, "outcome": outcome})
