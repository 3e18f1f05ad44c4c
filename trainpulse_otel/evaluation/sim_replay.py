"""One simulated scenario through the replay path: what ``trainpulse eval`` scores.

The scenario's samples are generated in memory as trace records (the
contract's trace shape) and replayed exactly as ``trainpulse replay`` would —
samples → frames → window → pipeline — so the figures are those of the real
path. Shared by the single-fault scoring (:mod:`.report`) and the pairs
(:mod:`.pairs`), which read the same timeline differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..collect.sim import SimulatedNode
from ..collect.sim.scenarios import Scenario
from ..collect.trace import TraceRecord
from ..config import Settings
from ..diagnose import Diagnosis, PipelineResult, Transition
from ..runtime import Plugins, open_replay
from ..runtime.replay import ReplayResult, replay

START_TS = 1764400000.0
#: The most the goodput's badput may miss the wall time not counted as productive by, as a share of the wall time.
MAX_GOODPUT_GAP = 0.01


@dataclass(frozen=True)
class Variant:
    """A job shape to run the scenarios on."""

    name: str
    ranks: int | None = None  # None: one rank per GPU
    job: dict[str, Any] = field(default_factory=dict)  # JobConfig overrides for every scenario


VARIANTS: dict[str, Variant] = {
    "default": Variant("default"),
    "multinode": Variant("multinode", ranks=64),
    "short_steps": Variant("short_steps", job={"micro_batch_size": 1}),
}

#: (seconds since the run's start, the transition), in time order.
Timeline = list[tuple[float, Transition]]


@dataclass(frozen=True)
class SimRun:
    """A replayed scenario: its transitions, the diagnosis it is judged on, how many ticks it took, and how far
    that diagnosis's goodput is from adding up (:func:`goodput_gap`)."""

    timeline: Timeline
    diagnosis: Diagnosis
    ticks: int
    goodput_gap: float | None = None


def sim_node(
    scenario: Scenario, seed: int, variant: Variant = VARIANTS["default"], interval_s: float = 1.0
) -> SimulatedNode:
    """The simulated node of this scenario on the variant's job shape."""
    if variant.job:
        scenario = replace(scenario, job={**variant.job, **scenario.job})
    return SimulatedNode(scenario, seed=seed, ranks=variant.ranks, interval_s=interval_s, start_ts=START_TS)


def sim_records(
    scenario: Scenario,
    seed: int,
    duration_s: float,
    variant: Variant = VARIANTS["default"],
    interval_s: float = 1.0,
    node: SimulatedNode | None = None,
) -> Iterator[TraceRecord]:
    """The trace a daemon would record for this scenario: events, gpus, host and (new) training lines per tick
    (``node``: the scenario's, made by :func:`sim_node`, where the caller reads it afterwards)."""
    node = node or sim_node(scenario, seed, variant, interval_s)
    for i in range(int(duration_s / interval_s)):
        t = i * interval_s
        got = node.sample(t)
        ts = START_TS + t
        for event in got.events or ():  # what the job printed, before the tick's samples (as a daemon records it)
            yield TraceRecord(0, event.ts, "event", event)
        if got.gpus is not None:
            yield TraceRecord(0, ts, "gpus", got.gpus)
        if got.host is not None:
            yield TraceRecord(0, ts, "host", got.host)
        if got.training is not None:
            yield TraceRecord(0, ts, "training", got.training)
        for report in got.nodes or ():  # another node of the job, as a job daemon records it
            if report.gpus is not None:
                yield TraceRecord(0, ts, "gpus", report.gpus, report.hostname)
            if report.host is not None:
                yield TraceRecord(0, ts, "host", report.host, report.hostname)


class _Capture:
    """Notes the diagnosis in force at one moment of the run."""

    def __init__(self, at_ts: float) -> None:
        self.at_ts = at_ts
        self.diagnosis: Diagnosis | None = None

    def __call__(self, result: PipelineResult) -> None:
        if result.diagnosis.ts <= self.at_ts:
            self.diagnosis = result.diagnosis


def replay_sim(
    records: Iterator[TraceRecord], interval_s: float, plugins: Plugins | None, capture: _Capture | None = None
) -> ReplayResult:
    """Replay generated records through a fresh replay step."""
    stepper = open_replay(Settings(interval=interval_s), plugins)
    return replay(records, stepper, interval_s=interval_s, on_result=capture)


def judge_at(scenario: Scenario, duration_s: float, interval_s: float) -> float:
    """When the diagnosis is judged: the end, or one tick before a leak's memory runs out (then the job is dead),
    unless the kill is the fault (``after_kill``)."""
    exhaust = scenario.exhaust_s
    return min(duration_s, exhaust) - interval_s if exhaust is not None and not scenario.after_kill else duration_s


def replay_scenario(
    scenario: Scenario,
    seed: int,
    variant: Variant,
    duration_s: float | None,
    interval_s: float,
    plugins: Plugins | None,
) -> SimRun:
    """Run ``scenario`` for ``duration_s`` (its own when None) and keep what scoring needs."""
    duration = scenario.duration_s if duration_s is None else duration_s
    capture = _Capture(START_TS + judge_at(scenario, duration, interval_s))
    reports: list[float] = []  # the times of the training reports with a step time
    records = noting_reports(sim_records(scenario, seed, duration, variant, interval_s), reports)
    result = replay_sim(records, interval_s, plugins, capture)
    timeline = [(t.ts - START_TS, t) for t in result.timeline]
    diagnosis = capture.diagnosis or result.diagnosis
    return SimRun(timeline, diagnosis, result.ticks, goodput_gap(diagnosis, reports))


def noting_reports(records: Iterator[TraceRecord], reports: list[float]) -> Iterator[TraceRecord]:
    """The records, as they are; the time of each training report with a step time is appended to ``reports``."""
    for record in records:
        if record.kind == "training" and record.payload.step_time_ms is not None:
            reports.append(record.ts)
        yield record


def goodput_gap(diagnosis: Diagnosis, reports: list[float]) -> float | None:
    """How far the diagnosis's goodput is from adding up, as a share of wall time (None without a goodput).

    The badput must sum to ``(1 - ratio) ×`` the wall time: the wall time the block says it is over
    (``wall_s``), and at least the wall time from the first training report to the last one the diagnosis
    saw (``reports``: their times) — so a ledger that stopped counting time cannot add up by counting
    less — and ``wall_s`` may not exceed the time that has passed. The largest miss, at most
    :data:`MAX_GOODPUT_GAP` by the contract.
    """
    goodput = diagnosis.goodput
    seen = [ts for ts in reports if ts <= diagnosis.ts]
    if goodput is None or goodput.wall_s is None or goodput.wall_s <= 0 or len(seen) < 2:
        return None
    badput, lost = sum(goodput.badput_s.values()), 1.0 - goodput.ratio
    covered = max(goodput.wall_s, seen[-1] - seen[0])  # a stall's time is counted past the last report
    misses = [abs(badput - lost * wall) / wall for wall in (goodput.wall_s, covered)]
    misses.append(max(0.0, goodput.wall_s - (diagnosis.ts - seen[0])) / goodput.wall_s)
    return max(misses)


def latency(timeline: Timeline, signal: str, onset: float) -> float | None:
    """Seconds from the onset until ``signal`` is first active at or after it (None: never)."""
    active: set[str] = set()
    for rel, t in timeline:
        if t.signal != signal:
            continue
        if rel >= onset:
            if active:
                return 0.0
            if t.event == "raised":
                return rel - onset
        key = repr(sorted(t.subject.items()))
        if t.event == "raised":
            active.add(key)
        else:
            active.discard(key)
    return 0.0 if active else None


def extra_and_early(timeline: Timeline, scenario: Scenario) -> tuple[list[str], list[str]]:
    """Signals raised after the onset outside expected ∪ allowed, and any raised before the onset."""
    ok_names = scenario.expected_signals | scenario.allowed_signals
    onset = scenario.onset_s
    raised = [(rel, t.signal) for rel, t in timeline if t.event == "raised"]
    extra = sorted({s for rel, s in raised if rel >= onset and s not in ok_names})
    early = sorted({s for rel, s in raised if rel < onset})
    return extra, early
