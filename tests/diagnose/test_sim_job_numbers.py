"""A job across four simulated nodes whose straggler every node's simulation knows (``-sim-fault-node 2``), heard
as a job daemon hears it (each node's report into the node table, one frame a tick): the signal, the cause's rank
budget, goodput and ETTR state one lateness, and the nodes' reports make one attempt."""

from __future__ import annotations

import pytest

from tests import parts
from trainpulse_otel.collect.sim import SimCollector
from trainpulse_otel.samples import NodeReport

T0 = 1_764_400_000.0
NODES = 4


def test_the_job_daemon_s_numbers_agree_on_a_straggler_every_node_knows():
    nodes = [SimCollector("rank_straggler", nodes=NODES, node_rank=i, onset_s=0.0, fault_node=2) for i in range(NODES)]
    job = parts.stepper(mode="none")
    for t in range(300):
        now = T0 + t
        for i in (3, 1, 2, 0):  # arrival order is not rank order
            seen = nodes[i].collect(now)
            job.latest.put_node(
                NodeReport(f"node-{i:03d}", gpus=seen.gpus, host=seen.host, training=seen.training), now
            )
        diagnosis = job.step(now).diagnosis
    straggler = next(s for s in diagnosis.signals if s.name == "rank_straggler")
    assert straggler.subject["rank"] == 21 and straggler.subject.get("hostname") == "node-002"
    wait_ms = straggler.evidence["peers_wait_ms"]
    goodput = diagnosis.goodput
    assert goodput is not None and goodput.job is not None
    # the wait is badput: the job's step is ideal + the wait, and goodput says so, not 0.99
    step_ms = goodput.ideal_step_time_ms + wait_ms
    assert goodput.window_ratio == pytest.approx(goodput.ideal_step_time_ms / step_ms, abs=0.05)
    assert max(goodput.badput_s, key=goodput.badput_s.get) == "straggler_rank"
    (rank,) = [r for r in goodput.ranks if r.rank == 21]
    assert rank.lost_ms_per_step == pytest.approx(wait_ms, rel=0.15)
    # one attempt, its ETTR the goodput's own share
    assert len(goodput.job["attempts"]) == 1 and goodput.job["interruptions"] == 0
    assert goodput.job["ettr"] == pytest.approx(goodput.ratio, abs=1e-3)
