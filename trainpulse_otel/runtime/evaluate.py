"""``trainpulse eval``: score the diagnosis against every simulated fault, then a long healthy run.

Each scenario's samples are generated in memory as trace records (the
contract's trace shape), replayed through the same path as ``trainpulse
replay`` — samples → frames → window → pipeline — and scored:

- detection: each expected signal's first raise at or after the onset, and
  its latency from the onset (from t = 0 for faults present from the first
  sample); a signal already active at the onset counts at the onset;
- false alarms: any signal raised before the onset, and any raised after it
  outside the scenario's expected ∪ allowed signals ("extra");
- the top root cause (and its subject, where the cause is local) in the
  diagnosis at the end of the scenario — for the leak scenarios one second
  before the memory runs out, since afterwards the job is dead;
- for scenarios with a memory exhaustion time, the ``oom_risk`` lead time.

Then the healthy scenario runs for an hour (realistic noise, GC pauses, data
spikes, sensor blips, a routine checkpoint) and every signal raised is a false
alarm. ``variants`` re-run the scenarios on another job shape: 64 ranks over 8
nodes, or half-length steps, so no threshold is tuned to one configuration.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..collect.sim import SimulatedNode
from ..collect.sim.scenarios import SCENARIOS, Scenario
from ..collect.trace import TraceRecord
from ..config import Settings
from ..diagnose import Diagnosis, PipelineResult, Transition
from .assemble import Plugins, discover, open_replay
from .replay import ReplayResult, replay

START_TS = 1764400000.0
HEALTHY = "healthy"

#: The figures ``trainpulse eval`` is judged by.
MAX_MEDIAN_LATENCY_S = 10.0
MAX_LATENCY_S = 60.0
MIN_OOM_LEAD_S = 120.0


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


@dataclass
class ScenarioResult:
    """How the diagnosis did on one scenario run."""

    scenario: str
    seed: int
    variant: str
    onset_s: float
    expected: list[str]
    latency_s: dict[str, float | None]
    extra: list[str]
    early: list[str]
    expected_cause: str | None
    top_cause: str | None
    top_subject: dict[str, Any]
    cause_ok: bool
    subject_ok: bool
    oom_lead_s: float | None = None
    ticks: int = 0

    @property
    def detected(self) -> bool:
        return all(v is not None for v in self.latency_s.values())

    @property
    def latency(self) -> float | None:
        """The scenario's detection latency: its slowest expected signal (None if one is missed)."""
        values = list(self.latency_s.values())
        return max(values) if values and None not in values else (0.0 if not values else None)  # type: ignore[type-var]


@dataclass
class HealthyResult:
    """Signals raised on a long healthy run: every one is a false alarm."""

    seed: int
    variant: str
    duration_s: float
    raised: list[dict[str, Any]]


@dataclass
class EvalReport:
    scenarios: list[ScenarioResult]
    healthy: list[HealthyResult]

    def summary(self) -> dict[str, Any]:
        """The figures, and whether each is met."""
        runs = self.scenarios
        latencies = [r.latency for r in runs if r.latency is not None]
        leads = [r.oom_lead_s for r in runs if r.oom_lead_s is not None]
        missing_leads = sum(1 for r in runs if _exhaust(r) is not None and r.oom_lead_s is None)
        false_alarms = sum(len(h.raised) for h in self.healthy)
        out = {
            "runs": len(runs),
            "detected": sum(r.detected for r in runs),
            "median_latency_s": statistics.median(latencies) if latencies else None,
            "max_latency_s": max(latencies) if latencies else None,
            "top_cause_right": sum(r.cause_ok and r.subject_ok for r in runs),
            "runs_with_extra_signals": sum(bool(r.extra) for r in runs),
            "early_false_alarms": sum(len(r.early) for r in runs),
            "healthy_seconds": sum(h.duration_s for h in self.healthy),
            "healthy_false_alarms": false_alarms,
            "min_oom_lead_s": min(leads) if leads else None,
        }
        out["figures"] = {
            "every_signal_detected": out["detected"] == len(runs),
            "median_latency": latencies != [] and out["median_latency_s"] <= MAX_MEDIAN_LATENCY_S,
            "max_latency": latencies != [] and out["max_latency_s"] <= MAX_LATENCY_S,
            "top_cause": out["top_cause_right"] == len(runs),
            "healthy_silent": false_alarms == 0,
            "oom_lead": missing_leads == 0 and all(v >= MIN_OOM_LEAD_S for v in leads),
        }
        return out

    @property
    def passed(self) -> bool:
        return all(self.summary()["figures"].values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenarios": [asdict(r) for r in self.scenarios],
            "healthy": [asdict(h) for h in self.healthy],
            "summary": self.summary(),
        }


def _exhaust(result: ScenarioResult) -> float | None:
    return SCENARIOS[result.scenario].exhaust_s if result.scenario in SCENARIOS else None


# ------------------------------------------------------------------ running


def sim_records(
    scenario: Scenario, seed: int, duration_s: float, variant: Variant = VARIANTS["default"], interval_s: float = 1.0
) -> Iterator[TraceRecord]:
    """The trace a daemon would record for this scenario: gpus, host and (new) training lines per tick."""
    if variant.job:
        scenario = replace(scenario, job={**variant.job, **scenario.job})
    node = SimulatedNode(scenario, seed=seed, ranks=variant.ranks, interval_s=interval_s, start_ts=START_TS)
    for i in range(int(duration_s / interval_s)):
        t = i * interval_s
        got = node.sample(t)
        ts = START_TS + t
        if got.gpus is not None:
            yield TraceRecord(0, ts, "gpus", got.gpus)
        if got.host is not None:
            yield TraceRecord(0, ts, "host", got.host)
        if got.training is not None:
            yield TraceRecord(0, ts, "training", got.training)


class _Capture:
    """Notes the diagnosis in force at one moment of the run."""

    def __init__(self, at_ts: float) -> None:
        self.at_ts = at_ts
        self.diagnosis: Diagnosis | None = None

    def __call__(self, result: PipelineResult) -> None:
        if result.diagnosis.ts <= self.at_ts:
            self.diagnosis = result.diagnosis


def _replay_sim(
    records: Iterator[TraceRecord], interval_s: float, plugins: Plugins | None, capture: _Capture | None = None
) -> ReplayResult:
    stepper = open_replay(Settings(interval=interval_s), plugins)
    return replay(records, stepper, interval_s=interval_s, on_result=capture)


def run_scenario(
    name: str,
    seed: int = 0,
    variant: Variant = VARIANTS["default"],
    duration_s: float | None = None,
    interval_s: float = 1.0,
    plugins: Plugins | None = None,
) -> ScenarioResult:
    """Replay one scenario and score it."""
    scenario = SCENARIOS[name]
    duration = scenario.duration_s if duration_s is None else duration_s
    exhaust = scenario.exhaust_s
    judge_at = min(duration, exhaust) - interval_s if exhaust is not None else duration
    capture = _Capture(START_TS + judge_at)
    result = _replay_sim(sim_records(scenario, seed, duration, variant, interval_s), interval_s, plugins, capture)
    timeline = [(t.ts - START_TS, t) for t in result.timeline]
    diagnosis = capture.diagnosis or result.diagnosis
    top = diagnosis.root_causes[0] if diagnosis.root_causes else None
    expected = sorted(scenario.expected_signals)
    latency = {s: _latency(timeline, s, scenario.onset_s) for s in expected}
    ok_names = scenario.expected_signals | scenario.allowed_signals
    extra = sorted(
        {
            t.signal
            for rel, t in timeline
            if t.event == "raised" and rel >= scenario.onset_s and t.signal not in ok_names
        }
    )
    early = sorted({t.signal for rel, t in timeline if t.event == "raised" and rel < scenario.onset_s})
    subject = dict(top.subject) if top else {}
    lead = None
    if exhaust is not None:
        raised = _latency(timeline, "oom_risk", scenario.onset_s)
        lead = None if raised is None else exhaust - (scenario.onset_s + raised)
    return ScenarioResult(
        scenario=name,
        seed=seed,
        variant=variant.name,
        onset_s=scenario.onset_s,
        expected=expected,
        latency_s=latency,
        extra=extra,
        early=early,
        expected_cause=scenario.expected_cause,
        top_cause=top.cause if top else None,
        top_subject=subject,
        cause_ok=(top.cause if top else None) == scenario.expected_cause,
        subject_ok=_subject_matches(scenario.expected_subject, subject),
        oom_lead_s=lead,
        ticks=result.ticks,
    )


def _latency(timeline: list[tuple[float, Transition]], signal: str, onset: float) -> float | None:
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


def _subject_matches(expected: dict[str, Any], subject: dict[str, Any]) -> bool:
    """Every expected key is in the subject, as a value or within the plural list (``gpu_indices``)."""
    for key, value in expected.items():
        plural = {"gpu_index": "gpu_indices", "rank": "ranks"}.get(key, key + "s")
        if subject.get(key) != value and value not in subject.get(plural, ()):
            return False
    return True


def run_healthy(
    seed: int = 0,
    duration_s: float = 3600.0,
    variant: Variant = VARIANTS["default"],
    interval_s: float = 1.0,
    plugins: Plugins | None = None,
) -> HealthyResult:
    """Replay the healthy job; every raised signal is a false alarm."""
    result = _replay_sim(sim_records(SCENARIOS[HEALTHY], seed, duration_s, variant, interval_s), interval_s, plugins)
    raised = [
        {
            "t_s": round(t.ts - START_TS, 1),
            "signal": t.signal,
            "severity": t.severity,
            "subject": dict(t.subject),
            "message": t.message,
        }
        for t in result.timeline
        if t.event == "raised"
    ]
    return HealthyResult(seed=seed, variant=variant.name, duration_s=duration_s, raised=raised)


def evaluate(
    scenarios: Sequence[str] | None = None,
    seeds: int = 1,
    variants: Sequence[str] = ("default",),
    healthy_s: float = 3600.0,
    interval_s: float = 1.0,
) -> EvalReport:
    """Every (variant, seed, scenario) run and the healthy runs."""
    names = [n for n in (scenarios or SCENARIOS) if n != HEALTHY]
    plugins = discover()
    runs, healthy = [], []
    for vname in variants:
        variant = VARIANTS[vname]
        for seed in range(seeds):
            runs += [run_scenario(n, seed, variant, interval_s=interval_s, plugins=plugins) for n in names]
            if healthy_s > 0:
                healthy.append(run_healthy(seed, healthy_s, variant, interval_s, plugins))
    return EvalReport(runs, healthy)


# ------------------------------------------------------------------ printing


def format_report(report: EvalReport) -> str:
    """The human-readable table and summary line."""
    lines = [
        (
            f"{'scenario':<23}{'variant':<12}{'seed':>4}  {'expected: latency':<36}{'top cause (subject)':<46}"
            f"{'ok':<3}extra / early"
        )
    ]
    for r in report.scenarios:
        lat = ", ".join(f"{k} {_secs(v)}" for k, v in r.latency_s.items()) or "—"
        if r.oom_lead_s is not None:
            lat += f" (lead {r.oom_lead_s:.0f} s)"
        ok = "✓" if r.cause_ok and r.subject_ok else "✗"
        cause = r.top_cause or "none"
        scalar = {k: v for k, v in r.top_subject.items() if not isinstance(v, list)}
        if scalar:
            cause += " (" + ", ".join(f"{k}={v}" for k, v in scalar.items()) + ")"
        elif r.top_subject:
            cause += f" ({len(next(iter(r.top_subject.values())))} {next(iter(r.top_subject))})"
        noise = ", ".join(r.extra) + (" / " + ", ".join(r.early) if r.early else "")
        lines.append(f"{r.scenario:<23}{r.variant:<12}{r.seed:>4}  {lat:<36}{cause:<46}{ok:<3}{noise}".rstrip())
    lines.extend(
        f"healthy {h.duration_s:.0f} s ({h.variant}, seed {h.seed}): {len(h.raised)} signal(s) raised"
        + "".join(f"\n    {x['t_s']:.0f} s {x['signal']} {x['subject']}: {x['message']}" for x in h.raised)
        for h in report.healthy
    )
    s = report.summary()
    lines.append("")
    lines.append(
        f"summary: {s['detected']}/{s['runs']} detected; median latency {_secs(s['median_latency_s'])}, "
        f"max {_secs(s['max_latency_s'])}; top cause {s['top_cause_right']}/{s['runs']}; "
        f"healthy {s['healthy_seconds']:.0f} s: {s['healthy_false_alarms']} false alarm(s); "
        f"early alarms {s['early_false_alarms']}; runs with extra signals {s['runs_with_extra_signals']}; "
        f"min oom lead {_secs(s['min_oom_lead_s'])} — "
        + (
            "all figures met"
            if all(s["figures"].values())
            else "missed: " + ", ".join(k for k, v in s["figures"].items() if not v)
        )
    )
    return "\n".join(lines)


def _secs(x: float | None) -> str:
    return "missed" if x is None else f"{x:.0f} s"
