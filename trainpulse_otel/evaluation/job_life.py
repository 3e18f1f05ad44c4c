"""``trainpulse eval``'s job-life rows: simulated jobs restarted from their checkpoints, scored against the truth.

Each life scenario (:mod:`~trainpulse_otel.collect.sim.lives`) is replayed through the same path as every other
scenario (:mod:`.sim_replay`); its diagnosis's ``goodput.job`` block is then held against what the simulator
did, read from its own record of each attempt's reports: the attempts; per restart, the steps done again (the
ended attempt's time past the step the new one resumed from), the gap from its last report to the new one's
first and the load the job said it took. A figure is right within :data:`TOLERANCE_S` seconds or
:data:`TOLERANCE_SHARE` of the truth, whichever is larger: the pipeline ticks once a second, so it places an
attempt's ends to within a tick. Goodput must add up over the whole life, as in every run.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..collect.sim.lives import LIVES
from ..collect.sim.scenarios import Scenario
from ..runtime import Plugins
from .sim_replay import MAX_GOODPUT_GAP, goodput_gap, noting_reports, replay_sim, sim_node, sim_records

#: How far a restart's figure may miss the simulator's: two ticks of 1 s (each end of an attempt is placed to
#: within one), or 10 % (the contract's tolerance on a real job), whichever is larger.
TOLERANCE_S = 2.0
TOLERANCE_SHARE = 0.10
#: The buckets scored, as the ``job`` block's ``lost_s`` names them.
BUCKETS = ("lost_progress", "restart", "checkpoint_load")


@dataclass
class LifeResult:
    """One life scenario's run: each bucket's seconds, the simulator's and the diagnosis's."""

    scenario: str
    seed: int
    attempts: int
    attempts_found: int
    truth_s: dict[str, float]
    found_s: dict[str, float]
    ettr: float | None
    goodput_gap: float | None

    @property
    def ok(self) -> bool:
        """The attempts right, every bucket within tolerance, and goodput adding up."""
        close = all(_close(self.found_s.get(b, 0.0), self.truth_s[b]) for b in BUCKETS)
        adds_up = self.goodput_gap is None or self.goodput_gap <= MAX_GOODPUT_GAP
        return self.attempts == self.attempts_found and close and adds_up


def _close(found: float, truth: float) -> bool:
    return abs(found - truth) <= max(TOLERANCE_S, TOLERANCE_SHARE * truth)


def run_life(name: str, seed: int = 0, interval_s: float = 1.0, plugins: Plugins | None = None) -> LifeResult:
    """Replay one life scenario and score its ``job`` block against the simulator's attempts."""
    scenario = LIVES[name]
    node = sim_node(scenario, seed, interval_s=interval_s)
    reports: list[float] = []
    records = noting_reports(
        sim_records(scenario, seed, scenario.duration_s, interval_s=interval_s, node=node), reports
    )
    diagnosis = replay_sim(records, interval_s, plugins).diagnosis
    goodput = diagnosis.goodput
    job = goodput.job if goodput is not None and goodput.job is not None else {}
    attempts = [a for a in node.attempts if a]
    return LifeResult(
        scenario=name,
        seed=seed,
        attempts=len(attempts),
        attempts_found=len(job.get("attempts", ())),
        truth_s=truth(attempts, scenario),
        found_s={b: float(job.get("lost_s", {}).get(b, 0.0)) for b in BUCKETS},
        ettr=job.get("ettr"),
        goodput_gap=None if (gap := goodput_gap(diagnosis, reports)) is None else round(gap, 6),
    )


def truth(attempts: list[list[tuple[int, float]]], scenario: Scenario) -> dict[str, float]:
    """Each bucket's seconds as the simulator's attempts (their reports' steps and times) say."""
    out = dict.fromkeys(BUCKETS, 0.0)
    load = float(scenario.job.get("checkpoint_load_s", 0.0))
    for ended, new in pairwise(attempts):
        resumed = new[0][0] - 1
        at = bisect_right(ended, (resumed, float("inf")))
        passed = ended[at - 1][1] if at else ended[0][1]
        out["lost_progress"] += ended[-1][1] - passed
        gap = new[0][1] - ended[-1][1]
        out["checkpoint_load"] += min(load, gap)
        out["restart"] += gap - min(load, gap)
    return {b: round(s, 3) for b, s in out.items()}


def evaluate_lives(seeds: int = 1, interval_s: float = 1.0, plugins: Plugins | None = None) -> list[LifeResult]:
    """Every life scenario on every seed."""
    return [run_life(name, seed, interval_s, plugins) for seed in range(seeds) for name in LIVES]


def lives_summary(lives: list[LifeResult]) -> dict[str, Any]:
    return {"runs": len(lives), "right": sum(r.ok for r in lives)}


def format_lives(lives: list[LifeResult]) -> list[str]:
    """The job-life table: per run, the attempts and each bucket, the diagnosis's against the simulator's."""
    head = f"{'job life':<33}{'seed':>4}  {'attempts':<10}" + "".join(f"{b + ' (s)':<22}" for b in BUCKETS)
    lines = [head + f"{'ettr':<7}ok"]
    for r in lives:
        cells = "".join(f"{f'{r.found_s[b]:.1f} / {r.truth_s[b]:.1f}':<22}" for b in BUCKETS)
        ettr = "—" if r.ettr is None else f"{r.ettr:.3f}"
        attempts = f"{r.attempts_found} / {r.attempts}"
        lines.append(f"{r.scenario:<33}{r.seed:>4}  {attempts:<10}{cells}{ettr:<7}{'✓' if r.ok else '✗'}")
    return lines
