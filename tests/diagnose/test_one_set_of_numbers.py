"""One diagnosis, one number for one fact: what a straggler's cause says it adds a step is what goodput's rank
entry says it costs, at every tick both are shown."""

from __future__ import annotations

import re

from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.config import Settings
from trainpulse_otel.evaluation.sim_replay import sim_records
from trainpulse_otel.runtime import discover, open_replay
from trainpulse_otel.runtime.replay import TraceFeed, group_ticks

ADDS = re.compile(r"of the (\d+) ms a step it adds")


def test_the_straggler_causes_ms_a_step_is_goodputs_rank_loss_at_every_tick():
    stepper = open_replay(Settings(), discover(autoload=False))
    feed = TraceFeed(stepper.latest)
    compared = 0
    for group in group_ticks(sim_records(SCENARIOS["rank_straggler"], seed=1, duration_s=900.0)):
        diagnosis = stepper.step(feed.apply(group)).diagnosis
        cause = next((c for c in diagnosis.root_causes if c.cause == "straggler_rank"), None)
        said = ADDS.search(cause.summary) if cause is not None else None
        if said is None or diagnosis.goodput is None:
            continue
        (rank,) = [r for r in diagnosis.goodput.ranks if r.rank == cause.subject["rank"]]
        assert int(said.group(1)) == round(rank.lost_ms_per_step), (diagnosis.ts, cause.summary, rank)
        compared += 1
    assert compared >= 100  # the straggler was named, with its cost, for most of the run
