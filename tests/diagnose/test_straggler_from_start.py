"""A straggler there from the first step: the wait the diagnosis attributes to it is badput, the ideal step is not
learned from the degraded job alone, and the signal, its cause and the rank budget state one lateness."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests import parts
from trainpulse_otel.collect.sim import SimCollector
from trainpulse_otel.collect.sim.combine import scenario_named
from trainpulse_otel.collect.sim.knobs import Effect
from trainpulse_otel.diagnose.budget import BudgetBuilder
from trainpulse_otel.samples import TrainingSample

T0 = 5000.0


def _from_the_first_step():
    """``rank_straggler`` with no healthy step before it: rank 5 is 35 % slower from the run's first sample."""
    return replace(scenario_named("rank_straggler"), onset_s=0.0, effects=(Effect("rank_slowdown", 1.35, gpus=(5,)),))


def _run(ticks: int):
    engine = parts.engine(collectors=[SimCollector(_from_the_first_step())])
    try:
        for t in range(ticks):
            result = engine.tick(T0 + t)
    finally:
        engine.close()
    return result.diagnosis


def test_a_straggler_from_the_first_step_is_badput_and_the_others_wait_is_its_share():
    diagnosis = _run(360)
    straggler = next(s for s in diagnosis.signals if s.name == "rank_straggler")
    wait_ms = straggler.evidence["peers_wait_ms"]
    goodput = diagnosis.goodput
    assert goodput is not None and goodput.ideal_step_time_ms is not None
    step_ms = goodput.ideal_step_time_ms + wait_ms
    # the ideal step is the job without the wait the diagnosis attributes, not the degraded job's pace
    assert goodput.ideal_step_time_ms < step_ms * 0.85
    # over the last minutes goodput is about ideal / step, and the straggler's badput is the largest
    assert goodput.window_ratio == pytest.approx(goodput.ideal_step_time_ms / step_ms, abs=0.05)
    assert max(goodput.badput_s, key=goodput.badput_s.get) == "straggler_rank"
    cause = next(c for c in diagnosis.root_causes if c.cause == "straggler_rank")
    # the rank budget behind the cause's "its lateness is its own compute: N of the M ms" agrees with the signal
    (rank,) = [r for r in goodput.ranks if r.rank == 5]
    assert rank.lost_ms_per_step == pytest.approx(wait_ms, rel=0.15)
    assert f"{rank.lost_ms['compute']:.0f} of the" in cause.summary


def test_the_budget_learns_no_pace_from_a_wait_it_is_told_is_a_straggler_s():
    builder = BudgetBuilder()

    def report(step: int) -> TrainingSample:
        return TrainingSample(step_time_ms=2400.0, sync_wait_ms=640.0, global_step=step)

    for step in range(40):  # the straggler not raised yet: its wait looks like the job's own
        builder.add(T0 + step, report(step))
    assert builder.ideal_ms == pytest.approx(2400.0)
    for step in range(40, 80):  # raised: the others wait 600 ms for it
        budget = builder.add(T0 + step, report(step), known_wait=600.0)
    assert builder.ideal_ms == pytest.approx(1800.0)
    assert budget is not None and budget.lost_ms["sync"] == pytest.approx(600.0)
    assert budget.lost_ms["compute"] == pytest.approx(0.0, abs=1e-6)
    # told of a wait longer than the report's sync wait, no more than the sync wait is taken out
    capped = BudgetBuilder()
    for step in range(40):
        capped.add(T0 + step, report(step), known_wait=5000.0)
    assert capped.ideal_ms == pytest.approx(1760.0)
