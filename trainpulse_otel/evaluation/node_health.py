"""``trainpulse eval``'s node-health rows: how long before a failure the node's risk rose, and how often it rises on
healthy nodes.

Each precursor scenario (:mod:`~trainpulse_otel.collect.sim.precursors`) is replayed through the same path as
every other scenario (:mod:`.sim_replay`): its lead is the time from ``link_degradation`` first raised on the GPU
that fails — when that GPU's and its node's risk rose — to the failure itself, which the diagnosis must then name
(``gpu_hardware_fault`` on that GPU, ``gpu_hardware_failure`` the cause). The false alarms come from healthy
simulated fleets (:mod:`.healthy_fleet`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ..collect.sim.precursors import PRECURSORS
from ..diagnose.detectors.gpu_faults import GPU_HARDWARE_FAULT
from ..diagnose.detectors.links import LINK_DEGRADATION
from ..runtime import Plugins
from .healthy_fleet import FleetResult, healthy_fleet
from .sim_replay import VARIANTS, Timeline, extra_and_early, replay_scenario

#: The signal whose first raise on the failing GPU marks its risk rising, and the one that marks the failure.
PRECURSOR_SIGNAL, FAILURE_SIGNAL = LINK_DEGRADATION.name, GPU_HARDWARE_FAULT.name
#: The figure: healthy nodes raise at most this many link alarms per 1,000 node-days (the B200 study's method
#: raised ~13; issue 35's bar).
MAX_FALSE_ALARMS_PER_1000_NODE_DAYS = 2.0


@dataclass
class PrecursorResult:
    """One precursor scenario's run: when the risk rose on the failing GPU, and whether the failure was named."""

    scenario: str
    seed: int
    gpu_index: int
    fails_at_s: float
    risk_rose_at_s: float | None
    failure_found: bool
    top_cause: str | None
    expected_cause: str | None
    extra: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)

    @property
    def lead_s(self) -> float | None:
        """How long before the failure the risk rose (None: it did not rise before it)."""
        rose = self.risk_rose_at_s
        return None if rose is None or rose >= self.fails_at_s else self.fails_at_s - rose

    @property
    def ok(self) -> bool:
        named = self.failure_found and self.top_cause == self.expected_cause
        return self.lead_s is not None and named and not self.extra and not self.early


def first_on_gpu(timeline: Timeline, signal: str, gpu: int, after_s: float = 0.0) -> float | None:
    """When ``signal`` was first raised on GPU ``gpu`` (of the simulated node) at or after ``after_s``."""
    return next(
        (rel for rel, t in timeline
         if t.event == "raised" and t.signal == signal and rel >= after_s and t.subject.get("gpu_index") == gpu),
        None,
    )  # fmt: skip


def run_precursor(name: str, seed: int = 0, interval_s: float = 1.0, plugins: Plugins | None = None) -> PrecursorResult:
    """Replay one precursor scenario and measure its lead."""
    precursor = PRECURSORS[name]
    scenario = precursor.scenario
    run = replay_scenario(scenario, seed, VARIANTS["default"], None, interval_s, plugins)
    top = run.diagnosis.root_causes[0] if run.diagnosis.root_causes else None
    extra, early = extra_and_early(run.timeline, scenario)
    failed = first_on_gpu(run.timeline, FAILURE_SIGNAL, precursor.gpu_index, precursor.fails_at_s)
    return PrecursorResult(
        scenario=name,
        seed=seed,
        gpu_index=precursor.gpu_index,
        fails_at_s=precursor.fails_at_s,
        risk_rose_at_s=first_on_gpu(run.timeline, PRECURSOR_SIGNAL, precursor.gpu_index),
        failure_found=failed is not None,
        top_cause=top.cause if top else None,
        expected_cause=scenario.expected_cause,
        extra=extra,
        early=early,
    )


@dataclass
class NodeHealthReport:
    precursors: list[PrecursorResult]
    fleet: FleetResult

    def summary(self) -> dict[str, Any]:
        leads = [r.lead_s for r in self.precursors if r.lead_s is not None]
        rate = self.fleet.per_1000_node_days
        return {
            "precursors": len(self.precursors),
            "right": sum(r.ok for r in self.precursors),
            "median_lead_s": statistics.median(leads) if leads else None,
            "min_lead_s": min(leads) if leads else None,
            "healthy_node_days": self.fleet.node_days,
            "false_alarms": self.fleet.alarms,
            "false_alarms_per_1000_node_days": rate,
            "ok": all(r.ok for r in self.precursors) and rate <= MAX_FALSE_ALARMS_PER_1000_NODE_DAYS,
        }

    def to_dict(self) -> dict[str, Any]:
        rows = [{**vars(r), "lead_s": r.lead_s, "ok": r.ok} for r in self.precursors]
        return {"precursors": rows, "healthy_fleet": self.fleet.to_dict()}


def evaluate_node_health(
    seeds: int = 1, interval_s: float = 1.0, plugins: Plugins | None = None, node_days: float | None = None
) -> NodeHealthReport:
    """Every precursor on every seed, and the healthy fleet (``node_days``: its size; None: its default)."""
    runs = [run_precursor(name, seed, interval_s, plugins) for seed in range(seeds) for name in PRECURSORS]
    return NodeHealthReport(runs, healthy_fleet() if node_days is None else healthy_fleet(node_days))


def format_node_health(report: NodeHealthReport) -> list[str]:
    """The node-health table: per precursor run, when the risk rose, the failure and the lead; the fleet's line."""
    lines = [f"{'node health: precursor':<33}{'seed':>4}  {'risk rose':<11}{'fails at':<10}{'lead':<8}cause ok"]
    for r in report.precursors:
        rose = "—" if r.risk_rose_at_s is None else f"{r.risk_rose_at_s:.0f} s"
        lead = "—" if r.lead_s is None else f"{r.lead_s:.0f} s"
        cause = r.top_cause or "—"
        row = f"{r.scenario:<33}{r.seed:>4}  {rose:<11}{r.fails_at_s:<10.0f}{lead:<8}{cause} {'✓' if r.ok else '✗'}"
        lines.append(row)
    f = report.fleet
    lines.append(
        f"healthy fleet: {f.node_days:g} node-days ({f.description}): {f.alarms} link alarm(s), "
        f"{f.per_1000_node_days:.2f} per 1,000 node-days (at most {MAX_FALSE_ALARMS_PER_1000_NODE_DAYS:g})"
    )
    return lines
