"""``trainpulse eval -pairs``: two faults at once, each of which must still be found.

A detector that sees one fault alone can miss it beside another (a straggler's long steps shrink
the data wait's share of the step). So each pair of catalogue faults runs as one combined
scenario (:func:`~trainpulse_otel.collect.sim.combine.combine`, every part from its own onset, on
the default job shape) and is scored part by part:

- detected: every expected signal of each part is active at or after that part's own onset;
- causes: every part's expected cause is among the top ``TOP`` root causes at the end (one tick
  before a leak's memory runs out). Subjects are not scored here.

A part whose fault the combination removes — the samples say so (:mod:`.ground_truth`) — is
excused and listed with its reason; a forecast that had too little load to be made is scored as
either of its GPU's heat signals. Both are counted. For example::

    trainpulse eval -pairs rank_straggler+dataloader_starvation,low_mfu+allreduce_wait

The rules and the measured results: docs/evaluation.md, docs/simulation.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ..collect.sim.combine import combine
from ..collect.sim.scenarios import SCENARIOS, Scenario
from ..runtime import Plugins
from .ground_truth import CHECKS, FORECAST_HORIZON_S, FORECASTS, NOT_IN_STEPS, Presence, presence_of
from .sim_replay import (
    MAX_GOODPUT_GAP,
    START_TS,
    VARIANTS,
    Timeline,
    extra_and_early,
    judge_at,
    latency,
    replay_scenario,
    sim_records,
)

#: Root causes a pair's expected causes must be among.
TOP = 2


@dataclass
class PairResult:
    """How the diagnosis did on two faults at once."""

    pair: str  # "a+b"
    seed: int
    variant: str
    onsets_s: dict[str, float]  # part -> its own onset
    latency_s: dict[str, dict[str, float | None]]  # part -> expected signal -> seconds from that part's onset
    expected_causes: list[str]
    top_causes: list[str]  # the top two at the judging time
    missing_causes: list[str]  # expected but not in the top two
    extra: list[str]
    early: list[str]
    detected: bool
    causes_ok: bool
    ticks: int = 0
    absent: dict[str, str] = field(default_factory=dict)  # part -> why its fault is not in the samples
    scored_instead: dict[str, str] = field(default_factory=dict)  # part -> why other signals stand for its own
    goodput_gap: float | None = None  # how far the badput misses the time lost, as a share of wall time

    @property
    def goodput_adds_up(self) -> bool:
        return self.goodput_gap is None or self.goodput_gap <= MAX_GOODPUT_GAP

    @property
    def missed_signals(self) -> list[str]:
        """Each expected signal never active after its part's onset (``signal (part)`` where they differ)."""
        return [
            sig if sig == part else f"{sig} ({part})"
            for part, lat in self.latency_s.items()
            for sig, v in lat.items()
            if v is None
        ]

    @property
    def latency(self) -> float | None:
        """The slowest expected signal of either part (None if one is missed)."""
        values = [v for lat in self.latency_s.values() for v in lat.values()]
        return None if None in values else max(values, default=0.0)  # type: ignore[type-var]


def fault_pairs(names: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """Every pair of fault scenarios (of ``names`` when given) that can run at once, in catalogue order."""
    faults = [n for n in SCENARIOS if n != "healthy" and (names is None or n in names)]
    return [(a, b) for a, b in combinations(faults, 2) if _combinable(a, b)]


def _combinable(a: str, b: str) -> bool:
    try:
        combine(SCENARIOS[a], SCENARIOS[b])
    except ValueError:  # two faults on one knob are one fault, not a pair
        return False
    return True


def parse_pairs(spec: str) -> list[tuple[str, str]]:
    """``a+b,c+d`` as pairs; a ValueError names an unknown scenario or a pair that is not two faults."""
    pairs = []
    for item in spec.split(","):
        names = [n.strip() for n in item.split("+")]
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario {unknown[0]!r} in pair {item!r}")
        if len(names) != 2:
            raise ValueError(f"a pair is two scenarios joined by '+', got {item!r}")
        combine(*(SCENARIOS[n] for n in names))  # the conflict, named
        pairs.append((names[0], names[1]))
    return pairs


def run_pair(
    names: tuple[str, str],
    seed: int = 0,
    duration_s: float | None = None,
    interval_s: float = 1.0,
    plugins: Plugins | None = None,
) -> PairResult:
    """Replay two faults at once on the default job shape and score each part."""
    scenario = combine(*(SCENARIOS[n] for n in names))
    run = replay_scenario(scenario, seed, VARIANTS["default"], duration_s, interval_s, plugins)
    presence = fault_presence(scenario, seed, duration_s, interval_s)
    lat = {p.name: part_latencies(run.timeline, p, presence[p.name]) for p in scenario.parts if presence[p.name].ever}
    top = [c.cause for c in run.diagnosis.root_causes[:TOP]]
    expected = list(dict.fromkeys(c for p in scenario.parts if presence[p.name].at_judge for c in p.expected_causes))
    missing = [c for c in expected if c not in top]
    extra, early = extra_and_early(run.timeline, scenario)
    standing_in = {s for p in presence.values() if p.instead is not None for s in p.instead.signals}
    extra = [s for s in extra if s not in standing_in]  # scored in a part's place, so not outside the key
    return PairResult(
        pair="+".join(names),
        seed=seed,
        variant="default",
        onsets_s={p.name: p.onset_s for p in scenario.parts},
        latency_s=lat,
        expected_causes=expected,
        top_causes=top,
        missing_causes=missing,
        extra=extra,
        early=early,
        detected=all(v is not None for part in lat.values() for v in part.values()),
        causes_ok=not missing,
        ticks=run.ticks,
        absent={name: p.reason for name, p in presence.items() if p.reason},
        scored_instead={name: p.instead.reason for name, p in presence.items() if p.instead is not None},
        goodput_gap=None if run.goodput_gap is None else round(run.goodput_gap, 6),
    )


def part_latencies(timeline: Timeline, part: Scenario, presence: Presence) -> dict[str, float | None]:
    """Seconds from the part's onset to each of its expected signals; for a part scored instead by any of several
    signals, to the first of them (keyed ``a or b``)."""
    if presence.instead is None:
        return {s: latency(timeline, s, part.onset_s) for s in sorted(part.expected_signals)}
    got = [v for s in presence.instead.signals if (v := latency(timeline, s, part.onset_s)) is not None]
    return {" or ".join(presence.instead.signals): min(got, default=None)}


def fault_presence(scenario: Scenario, seed: int, duration_s: float | None, interval_s: float) -> dict[str, Presence]:
    """Each part's fault as the samples show it (present throughout for faults no partner can remove)."""
    duration = scenario.duration_s if duration_s is None else duration_s
    judge = START_TS + judge_at(scenario, duration, interval_s)
    if all(p.name in NOT_IN_STEPS and p.name not in CHECKS for p in scenario.parts):
        return {p.name: Presence(True, True, "") for p in scenario.parts}
    run_on = FORECAST_HORIZON_S if any(p.name in FORECASTS for p in scenario.parts) else 0.0  # see a forecast come true
    records = list(sim_records(scenario, seed, duration + run_on, VARIANTS["default"], interval_s))
    out = {}
    for part in scenario.parts:
        partner = next(p for p in scenario.parts if p is not part)

        def alone(partner: Scenario = partner) -> list:
            return list(sim_records(partner, seed, duration, VARIANTS["default"], interval_s))

        out[part.name] = presence_of(
            part.name, records, alone, START_TS + part.onset_s, judge, dict(part.expected_subject)
        )
    return out


def pairs_summary(pairs: Sequence[PairResult]) -> dict[str, Any]:
    """The pairs' figures: how many were fully detected, and with both causes in the top two."""
    latencies = [p.latency for p in pairs if p.latency is not None]
    return {
        "runs": len(pairs),
        "detected": sum(p.detected for p in pairs),
        "causes_in_top_two": sum(p.causes_ok for p in pairs),
        "faults_absent": sum(len(p.absent) for p in pairs),
        "scored_instead": sum(len(p.scored_instead) for p in pairs),
        "max_latency_s": max(latencies, default=None),
        "runs_with_extra_signals": sum(bool(p.extra) for p in pairs),
        "goodput_adds_up": sum(p.goodput_adds_up for p in pairs),
    }


def pair_figures(summary: dict[str, Any]) -> dict[str, bool]:
    """Whether every pair was detected, and every pair's causes were in the top two."""
    return {
        "pairs_detected": summary["detected"] == summary["runs"],
        "pairs_causes_in_top_two": summary["causes_in_top_two"] == summary["runs"],
        "pairs_goodput_adds_up": summary["goodput_adds_up"] == summary["runs"],
    }


def format_pairs(pairs: Sequence[PairResult]) -> list[str]:
    """The pairs' table: latency, the top two causes, and what was missed."""
    lines = [f"{'pair':<46}{'seed':>4}  {'latency':<9}{'top two causes':<48}{'ok':<3}missed / extra"]
    for p in pairs:
        ok = "✓" if p.detected and p.causes_ok else "✗"
        lat = "missed" if p.latency is None else f"{p.latency:.0f} s"
        missed = [*p.missed_signals, *(f"cause {c}" for c in p.missing_causes)]
        missed += [] if p.goodput_adds_up else [f"goodput off by {p.goodput_gap:.1%} of wall time"]
        notes = ", ".join(missed) + (" / " + ", ".join(p.extra) if p.extra else "")
        notes += "".join(f" [{part} excused: {why}]" for part, why in p.absent.items())
        notes += "".join(f" [{part}: {why}]" for part, why in p.scored_instead.items())
        causes = ", ".join(p.top_causes) or "none"
        lines.append(f"{p.pair:<46}{p.seed:>4}  {lat:<9}{causes:<48}{ok:<3}{notes}".rstrip())
    return lines


def pairs_line(summary: dict[str, Any]) -> str:
    """The pairs' one-line summary, printed under the single faults' line."""
    return (
        f"pairs: {summary['detected']}/{summary['runs']} detected (every signal of both faults); "
        f"both causes in the top two {summary['causes_in_top_two']}/{summary['runs']}; "
        f"{summary['faults_absent']} fault(s) excused, absent from the samples; "
        f"{summary['scored_instead']} part(s) scored by the signals still due (a forecast as the fact or the "
        "forecast, a narrow link without its straggler); "
        f"goodput adds up {summary['goodput_adds_up']}/{summary['runs']}"
    )
