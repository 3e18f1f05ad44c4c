"""A simulated node of a job across nodes (``-sim-nodes N -sim-node-rank I``): its ranks are the job's global
ranks on that node, under the node's hostname; a scenario's per-GPU fault hits this node's GPUs and ranks;
each node draws its own noise; a one-node job is today's simulation."""

from __future__ import annotations

import pytest

from tests import parts
from trainpulse_otel.collect.modes import open_sim
from trainpulse_otel.collect.sim import SimCollector, SimulatedNode
from trainpulse_otel.collect.sim.job import MAX_RANKS, NODE_GPUS
from trainpulse_otel.config import ConfigError, Settings, load_settings

T0 = 5000.0
GPUS = 8


def test_a_nodes_snapshot_has_exactly_its_global_ranks_under_its_hostname():
    engine = parts.engine(load_settings(flags={"mode": "sim", "sim_nodes": 4, "sim_node_rank": 2}, environ={}))
    try:
        for t in range(5):
            engine.tick(T0 + t)
        snapshot = engine.snapshot()
    finally:
        engine.close()
    ranks = snapshot.training.ranks
    assert [r.rank for r in ranks] == list(range(16, 24))
    assert {r.hostname for r in ranks} == {"node-002"} and [r.gpu_index for r in ranks] == list(range(GPUS))
    assert snapshot.training.world_size == 32 and snapshot.training.hostname == "node-002"
    assert len(snapshot.gpus) == GPUS


def test_every_node_of_the_job_reports_its_own_ranks_and_together_they_are_the_job():
    seen = {}
    for node in range(4):
        report = SimCollector(nodes=4, node_rank=node).collect(T0).training
        seen.update({r.rank: r.hostname for r in report.ranks})
        assert report.step_time_ms > 0 and report.world_size == 32  # every node carries the job-level fields
    assert seen == {rank: f"node-{rank // GPUS:03d}" for rank in range(32)}


def test_a_straggler_on_node_2_of_4_is_global_rank_21():
    collector = SimCollector("rank_straggler", nodes=4, node_rank=2, onset_s=10.0)
    reports = [collector.collect(T0 + t).training for t in range(60)][-10:]  # past the 20 s ramp
    for report in reports:
        by_rank = {r.rank: r.step_time_ms for r in report.ranks}
        others = sorted(v for rank, v in by_rank.items() if rank != 21)
        assert by_rank[21] > 1.25 * others[len(others) // 2]
    engine = parts.engine(
        load_settings(
            flags={"mode": "sim", "scenario": "rank_straggler", "onset": "10s", "sim_nodes": 4, "sim_node_rank": 2},
            environ={},
        )
    )
    try:
        for t in range(150):
            result = engine.tick(T0 + t)
    finally:
        engine.close()
    straggler = next(s for s in result.diagnosis.signals if s.name == "rank_straggler")
    assert straggler.subject["rank"] == 21 and straggler.subject["gpu_index"] == 5


def test_each_node_draws_its_own_noise_and_the_same_node_the_same():
    def gpus(node: int):
        return SimCollector(nodes=4, node_rank=node).collect(T0).gpus

    assert gpus(1) == gpus(1)
    assert {g.uuid for g in gpus(1)}.isdisjoint(g.uuid for g in gpus(3))


def test_a_one_node_job_is_the_simulation_as_it_was():
    collector = open_sim(Settings(mode="sim"))
    node = SimulatedNode("healthy", start_ts=T0)
    for t in range(30):
        assert collector.collect(T0 + t) == node.sample(float(t))
    assert node.hostname == "node-000" and [r.rank for r in node.sample(31.0).training.ranks] == list(range(GPUS))


def test_sim_nodes_and_sim_node_rank_are_settings_with_errors_naming_the_key():
    assert load_settings(environ={"TRAINPULSE_SIM_NODES": "4", "TRAINPULSE_SIM_NODE_RANK": "3"}).sim_node_rank == 3
    assert load_settings(environ={}).sim_nodes == 1
    assert load_settings(flags={"sim_nodes": 512}, environ={}).sim_nodes * NODE_GPUS == MAX_RANKS  # the largest job
    for flags, key in (
        ({"sim_nodes": 0}, "sim_nodes"),
        ({"sim_nodes": 513}, "sim_nodes"),  # 513 nodes x 8 GPUs is over the simulator's 4,096 ranks
        ({"sim_nodes": 4, "sim_node_rank": 4}, "sim_node_rank"),
        ({"sim_node_rank": 1}, "sim_node_rank"),
        ({"sim_node_rank": -1}, "sim_node_rank"),
    ):
        with pytest.raises(ConfigError, match=f"^{key}: ") as caught:
            load_settings(flags=flags, environ={})
        assert caught.value.key == key


def test_a_fault_every_node_knows_slows_its_rank_for_every_node_and_only_its_node_s_gpus():
    """``-sim-fault-node 2``: each node runs the scenario; node 2's GPU 5 is slow on node 2 alone, and every node's
    ranks wait for global rank 21 as a real job's do, so every node's job-level step is the same slow one."""
    waits, steps = {}, {}
    for node in range(4):
        collector = SimCollector("rank_straggler", nodes=4, node_rank=node, onset_s=10.0, fault_node=2)
        samples = [collector.collect(T0 + t) for t in range(60)][-10:]  # past the 20 s ramp
        own = [r for s in samples for r in s.training.ranks if r.rank != 21]
        waits[node] = sorted(r.sync_wait_ms for r in own)[len(own) // 2]
        steps[node] = sorted(s.training.step_time_ms for s in samples)[5]
        healthy = SimCollector("healthy", nodes=4, node_rank=node).collect(T0)
        if node != 2:  # the other nodes' GPUs are their own, healthy ones
            assert [g.uuid for g in samples[-1].gpus] == [g.uuid for g in healthy.gpus]
    plain = SimCollector("healthy", nodes=4, node_rank=0)
    plain_wait = sorted(r.sync_wait_ms for r in [plain.collect(T0 + t) for t in range(60)][-1].training.ranks)[4]
    for node in range(4):
        assert waits[node] > plain_wait + 400.0  # waiting ~0.35 of a ~1.8 s step for rank 21
        assert waits[node] == pytest.approx(waits[2], rel=0.1) and steps[node] == pytest.approx(steps[2], rel=0.1)


def test_a_throttled_gpu_on_the_fault_node_slows_its_rank_for_every_node():
    """``thermal_instability`` on node 2: GPU 5 there throttles; node 0's simulation runs node 2's beside it, so
    its ranks wait for rank 21 about as long as node 2's own do, while its own GPUs stay cool."""
    waits, temps = {}, {}
    for node in (0, 2):
        collector = SimCollector("thermal_instability", nodes=4, node_rank=node, onset_s=10.0, fault_node=2)
        samples = [collector.collect(T0 + t) for t in range(240)][-120:]  # the throttle comes and goes
        own = [r.sync_wait_ms for s in samples if s.training for r in s.training.ranks if r.rank != 21]
        waits[node] = sum(own) / len(own)
        temps[node] = max(g.temperature_celsius for g in samples[-1].gpus)
    assert waits[0] == pytest.approx(waits[2], rel=0.15) and waits[0] > 150.0
    healthy = SimCollector("healthy", nodes=4, node_rank=0)
    calm = [r.sync_wait_ms for s in [healthy.collect(T0 + t) for t in range(240)][-120:] for r in s.training.ranks]
    assert waits[0] > 3 * sum(calm) / len(calm)
    assert temps[2] > temps[0] + 5.0  # the heat itself stays on node 2


def test_a_fault_on_its_own_node_or_none_named_is_the_simulation_as_it_was():
    def run(**kwargs):
        collector = SimCollector("rank_straggler", nodes=4, node_rank=2, onset_s=10.0, **kwargs)
        return [collector.collect(T0 + t) for t in range(40)]

    assert run(fault_node=2) == run()
    with pytest.raises(ValueError, match="fault_node"):
        SimCollector(nodes=4, node_rank=0, fault_node=4)
    with pytest.raises(ConfigError, match=r"^sim_fault_node: "):
        load_settings(flags={"sim_nodes": 4, "sim_fault_node": 4}, environ={})
    assert load_settings(environ={"TRAINPULSE_SIM_NODES": "4", "TRAINPULSE_SIM_FAULT_NODE": "2"}).sim_fault_node == 2
