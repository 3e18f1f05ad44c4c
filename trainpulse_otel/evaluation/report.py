"""``trainpulse eval``: score the diagnosis against every simulated fault, then a long healthy run.

Each scenario's samples are generated in memory as trace records and replayed through the same
path as ``trainpulse replay`` (:mod:`.sim_replay`), then scored: each expected signal's first
raise at or after the onset and its latency; false alarms (raised before the onset, or outside the
scenario's expected ∪ allowed signals); the top root cause and its subject at the end (for a leak,
one second before memory runs out); and the ``oom_risk`` lead time. Then the healthy scenario
runs for an hour and every signal raised is a false alarm. Variants re-run the scenarios on other
job shapes, so no threshold is tuned to one; ``-pairs`` adds two faults at once (:mod:`.pairs`). A full
run also scores the job's life across restarts on the jobs the simulator fails and restarts (:mod:`.job_life`),
and the node's risk rising before a failure and on healthy fleets (:mod:`.node_health`)::

    report = evaluate(seeds=3, variants=("default", "multinode"))
    print(format_report(report))  # per scenario: latency, top cause; the summary line; exit 1 on a miss

The rules and the measured figures: docs/evaluation.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..collect.sim.scenarios import SCENARIOS
from ..runtime import Plugins, discover
from .job_life import LifeResult, evaluate_lives, format_lives, lives_summary
from .node_health import NodeHealthReport, evaluate_node_health, format_node_health
from .pairs import PairResult, format_pairs, pair_figures, pairs_line, pairs_summary, run_pair
from .sim_replay import (
    MAX_GOODPUT_GAP,
    START_TS,
    VARIANTS,
    Variant,
    extra_and_early,
    latency,
    replay_scenario,
    replay_sim,
    sim_records,
)

HEALTHY = "healthy"

#: The figures ``trainpulse eval`` is judged by.
MAX_MEDIAN_LATENCY_S = 10.0
MAX_LATENCY_S = 60.0
MIN_OOM_LEAD_S = 120.0


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
    defined_after_s: float = 0.0
    goodput_gap: float | None = None  # how far the badput misses the time lost, as a share of wall time

    @property
    def detected(self) -> bool:
        return all(v is not None for v in self.latency_s.values())

    @property
    def latency(self) -> float | None:
        """The scenario's detection latency: its slowest expected signal (None if one is missed), counted from
        when the signal is defined to exist (``defined_after_s`` past the onset: a stall is one after 30 s)."""
        values = list(self.latency_s.values())
        if not values:
            return 0.0
        if None in values:
            return None
        return max(0.0, max(values) - self.defined_after_s)  # type: ignore[type-var]


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
    pairs: list[PairResult] = field(default_factory=list)  # only with ``-pairs``
    lives: list[LifeResult] = field(default_factory=list)  # a full run's jobs restarted from their checkpoints
    node_health: NodeHealthReport | None = None  # a full run's precursors and healthy fleet

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
            "goodput_adds_up": sum(adds_up(r.goodput_gap) for r in runs),
        }
        out["figures"] = {
            "every_signal_detected": out["detected"] == len(runs),
            "median_latency": latencies != [] and out["median_latency_s"] <= MAX_MEDIAN_LATENCY_S,
            "max_latency": latencies != [] and out["max_latency_s"] <= MAX_LATENCY_S,
            "top_cause": out["top_cause_right"] == len(runs),
            "healthy_silent": false_alarms == 0,
            "oom_lead": missing_leads == 0 and all(v >= MIN_OOM_LEAD_S for v in leads),
            "goodput_adds_up": out["goodput_adds_up"] == len(runs),
        }
        if self.pairs:
            out["pairs"] = pairs_summary(self.pairs)
            out["figures"].update(pair_figures(out["pairs"]))
        if self.lives:
            out["job_life"] = lives_summary(self.lives)
            out["figures"]["job_life"] = out["job_life"]["right"] == len(self.lives)
        if self.node_health is not None:
            out["node_health"] = self.node_health.summary()
            out["figures"]["node_health"] = out["node_health"]["ok"]
        return out

    @property
    def passed(self) -> bool:
        return all(self.summary()["figures"].values())

    def to_dict(self) -> dict[str, Any]:
        pairs = {"pairs": [asdict(p) for p in self.pairs]} if self.pairs else {}
        lives = {"job_life": [{**asdict(r), "ok": r.ok} for r in self.lives]} if self.lives else {}
        health = {"node_health": self.node_health.to_dict()} if self.node_health is not None else {}
        return {
            "scenarios": [asdict(r) for r in self.scenarios],
            "healthy": [asdict(h) for h in self.healthy],
            **pairs,
            **lives,
            **health,
            "summary": self.summary(),
        }


def adds_up(gap: float | None) -> bool:
    """Whether a run's badput adds up to the time it lost, within :data:`MAX_GOODPUT_GAP` (a run without a
    goodput block has nothing to add up)."""
    return gap is None or gap <= MAX_GOODPUT_GAP


def _exhaust(result: ScenarioResult) -> float | None:
    return SCENARIOS[result.scenario].exhaust_s if result.scenario in SCENARIOS else None


# ------------------------------------------------------------------ running


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
    run = replay_scenario(scenario, seed, variant, duration_s, interval_s, plugins)
    top = run.diagnosis.root_causes[0] if run.diagnosis.root_causes else None
    expected = sorted(scenario.expected_signals)
    extra, early = extra_and_early(run.timeline, scenario)
    subject = dict(top.subject) if top else {}
    lead = None
    exhaust = scenario.exhaust_s
    if exhaust is not None:
        raised = latency(run.timeline, "oom_risk", scenario.onset_s)
        lead = None if raised is None else exhaust - (scenario.onset_s + raised)
    return ScenarioResult(
        scenario=name,
        seed=seed,
        variant=variant.name,
        onset_s=scenario.onset_s,
        expected=expected,
        latency_s={s: latency(run.timeline, s, scenario.onset_s) for s in expected},
        extra=extra,
        early=early,
        expected_cause=scenario.expected_cause,
        top_cause=top.cause if top else None,
        top_subject=subject,
        cause_ok=(top.cause if top else None) == scenario.expected_cause,
        subject_ok=_subject_matches(scenario.expected_subject, subject),
        oom_lead_s=lead,
        ticks=run.ticks,
        defined_after_s=scenario.defined_after_s,
        goodput_gap=None if run.goodput_gap is None else round(run.goodput_gap, 6),
    )


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
    result = replay_sim(sim_records(SCENARIOS[HEALTHY], seed, duration_s, variant, interval_s), interval_s, plugins)
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
    pairs: Sequence[tuple[str, str]] = (),
) -> EvalReport:
    """Every (variant, seed, scenario) run, the healthy runs, each pair per seed on the default variant, and —
    asked for no scenario by name — every job restarted from its checkpoints per seed."""
    names = [n for n in (scenarios or SCENARIOS) if n != HEALTHY]
    plugins = discover()
    runs, healthy = [], []
    for vname in variants:
        variant = VARIANTS[vname]
        for seed in range(seeds):
            runs += [run_scenario(n, seed, variant, interval_s=interval_s, plugins=plugins) for n in names]
            if healthy_s > 0:
                healthy.append(run_healthy(seed, healthy_s, variant, interval_s, plugins))
    paired = [run_pair(p, seed, interval_s=interval_s, plugins=plugins) for seed in range(seeds) for p in pairs]
    lives = evaluate_lives(seeds, interval_s, plugins) if scenarios is None else []
    health = evaluate_node_health(seeds, interval_s, plugins) if scenarios is None else None
    return EvalReport(runs, healthy, paired, lives, health)


# ------------------------------------------------------------------ printing


def format_report(report: EvalReport) -> str:
    """The human-readable table and summary line (and, with pairs, their table and line)."""
    lines = [
        (
            f"{'scenario':<31}{'variant':<12}{'seed':>4}  {'expected: latency':<36}{'top cause (subject)':<46}"
            f"{'ok':<3}extra / early"
        )
    ]
    for r in report.scenarios:
        lat = ", ".join(f"{k} {_secs(v)}" for k, v in r.latency_s.items()) or "—"
        if r.defined_after_s:
            lat += f" (of {r.defined_after_s:.0f})"
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
        if not adds_up(r.goodput_gap):
            noise += f" [goodput off by {r.goodput_gap:.1%} of wall time]"
        lines.append(f"{r.scenario:<31}{r.variant:<12}{r.seed:>4}  {lat:<36}{cause:<46}{ok:<3}{noise}".rstrip())
    lines.extend(
        f"healthy {h.duration_s:.0f} s ({h.variant}, seed {h.seed}): {len(h.raised)} signal(s) raised"
        + "".join(f"\n    {x['t_s']:.0f} s {x['signal']} {x['subject']}: {x['message']}" for x in h.raised)
        for h in report.healthy
    )
    s = report.summary()
    if report.pairs:
        lines += ["", *format_pairs(report.pairs)]
    if report.lives:
        lines += ["", *format_lives(report.lives)]
    if report.node_health is not None:
        lines += ["", *format_node_health(report.node_health)]
    lines.append("")
    lines.append(
        f"summary: {s['detected']}/{s['runs']} detected; median latency {_secs(s['median_latency_s'])}, "
        f"max {_secs(s['max_latency_s'])}; top cause {s['top_cause_right']}/{s['runs']}; "
        f"healthy {s['healthy_seconds']:.0f} s: {s['healthy_false_alarms']} false alarm(s); "
        f"early alarms {s['early_false_alarms']}; runs with extra signals {s['runs_with_extra_signals']}; "
        f"goodput adds up {s['goodput_adds_up']}/{s['runs']}; "
        + _oom_lead(s)
        + " — "
        + (
            "all figures met"
            if all(s["figures"].values())
            else "missed: " + ", ".join(k for k, v in s["figures"].items() if not v)
        )
    )
    if report.pairs:
        lines.append(pairs_line(s["pairs"]))
    if report.lives:
        life = s["job_life"]
        lines.append(f"job life: {life['right']}/{life['runs']} restarted jobs with their attempts and costs right")
    if report.node_health is not None:
        h = s["node_health"]
        lines.append(
            f"node health: {h['right']}/{h['precursors']} failures announced and named, median lead "
            f"{_secs(h['median_lead_s'])}; healthy fleet {h['false_alarms_per_1000_node_days']:.2f} false alarms "
            "per 1,000 node-days"
        )
    return "\n".join(lines)


def _oom_lead(s: dict) -> str:
    """The OOM forecasts' shortest lead, missed, or that no run had a memory leak to forecast."""
    if s["min_oom_lead_s"] is None and s["figures"]["oom_lead"]:
        return "no OOM to forecast"
    return f"min oom lead {_secs(s['min_oom_lead_s'])}"


def _secs(x: float | None) -> str:
    return "missed" if x is None else f"{x:.0f} s"
