"""The simulated node: determinism, a coherent healthy job, and each fault visible after onset only."""

from __future__ import annotations

import statistics
from dataclasses import replace
from itertools import pairwise

import pytest

from tests.collect.sim_runs import START, run, ticks, training
from trainpulse_otel.collect.base import Collected, Collector
from trainpulse_otel.collect.sim import (
    GPU_MEMORY_BYTES,
    HOST_MEMORY_BYTES,
    JOB_HEALTHY,
    PEAK_BF16_FLOPS,
    SimCollector,
    SimulatedNode,
)
from trainpulse_otel.collect.sim.job import ALLREDUCE_MS
from trainpulse_otel.collect.sim.scenarios import GPU_KNOBS, JOB_KNOBS, SCENARIOS, Effect
from trainpulse_otel.diagnose import ROOT_CAUSES, SIGNALS
from trainpulse_otel.samples import (
    TrainingSample,
    parse_gpus,
    parse_host,
    parse_training,
    to_dict,
)


def median(values) -> float:
    return statistics.median(list(values))


def share(tr: list[TrainingSample], field: str) -> float:
    """Median share of the step spent in ``field``."""
    return median(getattr(s, field) / s.step_time_ms for s in tr)


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope."""
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def before(name: str) -> tuple[float, float]:
    """A healthy window: after start-up, before the scenario's onset."""
    return 10.0, SCENARIOS[name].onset_s


def late(name: str, seconds: float = 120.0) -> tuple[float, float]:
    """The last ``seconds`` of the scenario, well after any ramp."""
    end = SCENARIOS[name].duration_s
    return end - seconds, end


def drop(name: str, field: str = "tokens_per_sec") -> float:
    """Relative fall of a training field's median from before onset to late in the run."""
    samples = run(name)
    was = median(getattr(s, field) for s in training(samples, *before(name)))
    now = median(getattr(s, field) for s in training(samples, *late(name)))
    return 1 - now / was


# ------------------------------------------------------------------ determinism and validity


def test_same_seed_same_samples_and_another_seed_differs():
    a = SimulatedNode("thermal_instability", seed=7)
    b = SimulatedNode("thermal_instability", seed=7)
    c = SimulatedNode("thermal_instability", seed=8)
    ts = [t * 0.5 for t in range(600)]
    first = [a.sample(t) for t in ts]
    assert first == [b.sample(t) for t in ts]
    assert first != [c.sample(t) for t in ts]


def without_heartbeats(c: Collected) -> Collected:
    """The tick as a job that sends no rank heartbeats would show it."""
    if c.training is None:
        return c
    ranks = tuple(replace(r, global_step=None, phase=None, phase_since=None, pid=None) for r in c.training.ranks)
    return replace(c, training=replace(c.training, ranks=ranks))


#: Scenarios of another job's shape (node_unreachable's spans 4 nodes, network_error's 2): not the same job as
#: healthy's before onset.
OTHER_JOBS = frozenset(n for n, s in SCENARIOS.items() if s.job.get("peer_nodes") or s.job.get("nodes", 1) > 1)


@pytest.mark.parametrize(
    "name", [n for n, s in SCENARIOS.items() if s.onset_s > 0 and n != "healthy" and n not in OTHER_JOBS]
)
def test_before_onset_a_scenario_is_exactly_the_healthy_run(name):
    """Apart from the heartbeats a scenario's job may send (training_stalled's does)."""
    onset = SCENARIOS[name].onset_s
    before = [without_heartbeats(c) for c in ticks(run(name), 0, onset)]
    assert before == ticks(run("healthy", 400), 0, onset)


def test_a_job_view_scenario_hears_every_node_until_one_goes_silent_with_its_ranks():
    scenario = SCENARIOS["node_unreachable"]
    node = SimulatedNode("node_unreachable")
    before = node.sample(0.0)
    assert [r.hostname for r in before.nodes] == ["node-001", "node-002", "node-003"]
    assert all(len(r.gpus) == 8 and r.host is not None for r in before.nodes)
    assert {r.hostname for r in before.training.ranks} == {f"node-{n:03d}" for n in range(4)}
    for t in range(1, int(scenario.onset_s) + 5):
        after = node.sample(float(t))
    assert [r.hostname for r in after.nodes] == ["node-001", "node-003"]
    assert not any(r.hostname == "node-002" for r in after.training.ranks)
    assert after.training.step_time_ms is None  # the job waits in the all-reduce: no step completes
    assert {r.phase for r in after.training.ranks} == {"all_reduce"}


def test_a_job_with_heartbeats_sends_them_on_every_rank_of_every_report():
    for _, c in run("training_stalled"):
        assert c.training is not None and c.training.ranks
        assert all(r.phase is not None and r.global_step is not None and r.pid for r in c.training.ranks)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_sample_passes_validation_and_round_trips(name):
    for t, c in run(name):
        assert parse_gpus([to_dict(g) for g in c.gpus]) == c.gpus
        assert parse_host(to_dict(c.host)) == c.host
        if c.training is not None:
            assert parse_training(to_dict(c.training)) == c.training
            assert c.training.timestamp == START + t


def test_timestamps_follow_start_ts_and_t():
    node = SimulatedNode(start_ts=1000.0)
    assert [node.sample(t).training.timestamp for t in (0.0, 1.5, 3.0)] == [1000.0, 1001.5, 1003.0]


# ------------------------------------------------------------------ the healthy job


@pytest.fixture(scope="module")
def healthy() -> list[TrainingSample]:
    return training(run("healthy", 600))


def test_healthy_job_identity_and_shape(healthy):
    s = healthy[0]
    assert (s.model_family, s.model_name, s.framework, s.precision, s.workload_kind) == (
        "llama",
        "llama-3-8b",
        "pytorch",
        "bf16",
        "pretraining",
    )
    assert (s.world_size, s.tensor_parallel_size, s.pipeline_parallel_size, s.data_parallel_size) == (8, 1, 1, 8)
    assert s.global_batch_size == s.micro_batch_size * s.gradient_accumulation_steps * s.data_parallel_size
    assert s.max_seq_len == 4096 and all(x.avg_seq_len >= 0.99 * x.max_seq_len for x in healthy)  # packed
    assert [(r.rank, r.gpu_index, r.hostname) for r in s.ranks] == [(i, i, "node-000") for i in range(8)]
    assert all(
        None not in (r.step_time_ms, r.tokens_per_sec, r.data_wait_ms, r.sync_wait_ms, r.all_reduce_wait_ms)
        for x in healthy
        for r in x.ranks
    )


def test_healthy_throughput_is_consistent_with_batch_and_step_time(healthy):
    for s in healthy:
        tokens = s.global_batch_size * s.avg_seq_len
        assert s.tokens_per_sec == pytest.approx(tokens / (s.step_time_ms / 1000), rel=1e-4)
        assert s.samples_per_sec == pytest.approx(s.global_batch_size / (s.step_time_ms / 1000), rel=1e-3)
        mfu = 6 * 8.03e9 * s.tokens_per_sec / (s.world_size * PEAK_BF16_FLOPS)
        assert s.mfu == pytest.approx(mfu, abs=1e-4)
        assert s.tflops == pytest.approx(mfu * PEAK_BF16_FLOPS / 1e12, abs=0.02)
    assert 0.40 <= median(s.mfu for s in healthy) <= 0.50
    assert 1000 <= median(s.step_time_ms for s in healthy) <= 2000


def test_healthy_step_noise_and_time_budget(healthy):
    steps = sorted(s.step_time_ms for s in healthy)
    q1, q3 = steps[len(steps) // 4], steps[3 * len(steps) // 4]
    assert 0.015 <= (q3 - q1) / 1.349 / median(steps) <= 0.045  # robust CV: glitches aside
    assert 0.05 <= share(healthy, "all_reduce_wait_ms") <= 0.10
    assert median(s.data_wait_ms for s in healthy) < 10
    assert median(s.tokenizer_wait_ms for s in healthy) < 5
    assert median(s.sync_wait_ms for s in healthy) < 50
    assert all(s.checkpoint_ms == 0 and s.pipeline_bubble_ratio == 0 for s in healthy)


def test_rank_semantics_busy_time_excludes_waiting_for_peers(healthy):
    for s in healthy:
        arrivals = [r.data_wait_ms + r.step_time_ms - r.all_reduce_wait_ms for r in s.ranks]
        last = arrivals.index(max(arrivals))
        barrier = s.ranks[last].sync_wait_ms  # the last to arrive pays only the barrier's own cost
        assert 0.15 * ALLREDUCE_MS < barrier < 0.25 * ALLREDUCE_MS  # a fifth of the all-reduce, as a real job pays
        for r, arrival in zip(s.ranks, arrivals, strict=True):
            assert r.sync_wait_ms == pytest.approx(max(arrivals) - arrival + barrier, abs=0.4 * barrier)  # ±15 % each
        assert s.step_time_ms >= max(arrivals) + median(r.all_reduce_wait_ms for r in s.ranks) * 0.98
        ars = [r.all_reduce_wait_ms for r in s.ranks]
        assert max(ars) / min(ars) < 1.03


def test_healthy_gpus_and_host_look_like_a_busy_h100_node():
    collected = ticks(run("healthy", 600))
    gpus = [g for c in collected for g in c.gpus]
    assert {g.name for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert len({g.uuid for g in gpus}) == 8 and all(g.uuid.startswith("GPU-") for g in gpus)
    for i in range(8):
        mine = [g for g in gpus if g.index == i]
        assert 95 <= median(g.utilization_percent for g in mine) <= 99
        assert 60e9 <= median(g.memory_used_bytes for g in mine) <= 70e9
        assert all(g.memory_total_bytes == GPU_MEMORY_BYTES for g in mine)
        assert 60 <= median(g.temperature_celsius for g in mine) <= 72
        assert 550 <= median(g.power_watts for g in mine) <= 690
        assert median(g.sm_clock_mhz for g in mine) == 1980 == mine[0].max_sm_clock_mhz
    assert all(g.throttle_reasons == () and g.ecc_uncorrected_errors == 0 for g in gpus)
    hosts = [c.host for c in collected]
    assert 20 <= median(h.cpu_percent for h in hosts) <= 35
    assert hosts[0].cpu_count == 192 and hosts[0].memory_total_bytes == HOST_MEMORY_BYTES
    assert 1.35 * 2**40 <= median(h.memory_available_bytes for h in hosts) <= 1.45 * 2**40
    assert all(h.swap_used_bytes < 0.1 * h.swap_total_bytes for h in hosts)
    assert 40 <= median(h.load1 for h in hosts) <= 70


def test_an_hour_of_healthy_training_has_only_rare_isolated_glitches():
    samples = run("healthy")
    tr = training(samples)
    typical = median(s.step_time_ms for s in tr)
    slow = [i for i, s in enumerate(tr) if s.step_time_ms > 1.2 * typical]
    assert 3 <= len(slow) <= 40  # GC pauses and checkpoint steps: present, but rare
    assert max(sum(w <= i < w + 10 for i in slow) for w in range(len(tr))) <= 3  # never sustained
    assert 1 <= sum(s.data_wait_ms > 50 for s in tr) <= 20
    saves = [s.checkpoint_ms for s in tr if s.checkpoint_ms]
    assert len(saves) == 2 and all(3000 <= ms <= 7000 for ms in saves)  # every 20 minutes, a few seconds
    assert len(samples) - len(tr) <= 15  # only those saves block reporting
    temps = [g.temperature_celsius for _, c in samples for g in c.gpus]
    assert max(temps) < 78 and sum(t > 72 for t in temps) < 20
    assert all(set(g.throttle_reasons) <= {"gpu_idle"} for _, c in samples for g in c.gpus)
    assert statistics.fmean(s.loss for s in tr[:300]) > statistics.fmean(s.loss for s in tr[-300:])
    assert all(0 < s.learning_rate <= 3e-4 for s in tr)


# ------------------------------------------------------------------ the faults


def test_dataloader_starvation():
    name, samples = "dataloader_starvation", run("dataloader_starvation")
    assert share(training(samples, *before(name)), "data_wait_ms") < 0.01
    tr = training(samples, *late(name))
    assert 0.35 <= share(tr, "data_wait_ms") <= 0.50
    assert median(s.tokenizer_wait_ms for s in tr) < 5
    assert drop(name) >= 0.3
    now = ticks(samples, *late(name))
    assert median(g.utilization_percent for c in now for g in c.gpus) < 70
    assert median(c.host.cpu_percent for c in now) > 85
    assert now[-1].host.load1 > 1.5 * ticks(samples, *before(name))[-1].host.load1


def test_gpu_underutilization_is_launch_bound_not_input_bound():
    name, samples = "gpu_underutilization", run("gpu_underutilization")
    now = ticks(samples, *late(name))
    for i in range(8):
        assert 35 <= median(c.gpus[i].utilization_percent for c in now) <= 50
    tr = training(samples, *late(name))
    assert median(s.data_wait_ms for s in tr) < 10
    assert median(s.mfu for s in tr) < 0.25
    was = ticks(samples, *before(name))
    assert median(c.host.cpu_percent for c in now) > median(c.host.cpu_percent for c in was) + 8


def test_sync_imbalance_moves_the_slowest_rank_every_step():
    name, samples = "sync_imbalance", run("sync_imbalance")

    def busy_cv(s: TrainingSample) -> float:
        busy = [r.step_time_ms for r in s.ranks]
        return statistics.pstdev(busy) / statistics.fmean(busy)

    assert median(busy_cv(s) for s in training(samples, *before(name))) < 0.02
    tr = training(samples, *late(name))
    assert 0.18 <= median(busy_cv(s) for s in tr) <= 0.32
    slowest = [max(s.ranks, key=lambda r: r.step_time_ms).rank for s in tr]
    assert len(set(slowest)) == 8 and max(slowest.count(r) for r in range(8)) < 0.3 * len(tr)
    was = median(s.sync_wait_ms for s in training(samples, *before(name)))
    assert median(s.sync_wait_ms for s in tr) > 10 * was
    assert statistics.pstdev(s.sync_wait_ms for s in tr) > 100  # large and variable


def test_memory_pressure_fills_every_gpu_and_jitters_the_step():
    name, samples = "memory_pressure", run("memory_pressure")
    for c in ticks(samples, *late(name, 80)):
        assert all(0.97 <= g.memory_used_bytes / g.memory_total_bytes <= 0.99 for g in c.gpus)
    assert all(g.memory_used_bytes / g.memory_total_bytes < 0.85 for c in ticks(samples, *before(name)) for g in c.gpus)

    def cv(tr):
        steps = [s.step_time_ms for s in tr]
        return statistics.pstdev(steps) / statistics.fmean(steps)

    assert cv(training(samples, *late(name, 80))) > 2 * cv(training(samples, *before(name)))


def test_thermal_instability_cycles_gpu5_through_its_slowdown_point():
    name, samples = "thermal_instability", run("thermal_instability")
    assert all(g.throttle_reasons == () for c in ticks(samples, *before(name)) for g in c.gpus)
    now = ticks(samples, *late(name, 150))
    gpu5 = [c.gpus[5] for c in now]
    assert all(84 <= g.temperature_celsius <= 90 for g in gpu5)
    throttled = ["sw_thermal" in g.throttle_reasons for g in gpu5]
    assert 0.25 <= sum(throttled) / len(throttled) <= 0.9
    assert sum(a and not b for a, b in pairwise(throttled)) >= 10  # on and off
    assert any("hw_thermal" in g.throttle_reasons for g in gpu5)
    assert all(1350 <= g.sm_clock_mhz <= 1650 for g, hot in zip(gpu5, throttled, strict=True) if hot)
    assert all(g.sm_clock_mhz >= 1950 for g, hot in zip(gpu5, throttled, strict=True) if not hot)
    assert all(c.gpus[i].throttle_reasons == () for c in now for i in range(8) if i != 5)
    hot_steps = [c.training for c, hot in zip(now, throttled, strict=True) if hot]
    for s in hot_steps:
        others = [r.step_time_ms for r in s.ranks if r.rank != 5]
        assert s.ranks[5].step_time_ms >= 1.15 * median(others)
    was = median(s.sync_wait_ms for s in training(samples, *before(name)))
    assert median(r.sync_wait_ms for s in hot_steps for r in s.ranks if r.rank != 5) > 10 * was


def test_throughput_collapse_is_an_abrupt_power_cap_on_every_gpu():
    name, samples = "throughput_collapse", run("throughput_collapse")
    assert 0.35 <= drop(name) <= 0.55
    onset = SCENARIOS[name].onset_s
    was = median(s.tokens_per_sec for s in training(samples, *before(name)))
    assert median(s.tokens_per_sec for s in training(samples, onset + 2, onset + 10)) < 0.7 * was
    for c in ticks(samples, onset + 5, SCENARIOS[name].duration_s):
        for g in c.gpus:
            assert g.power_limit_watts == 350 and "sw_power_cap" in g.throttle_reasons
            assert g.power_watts <= 350 and 1000 <= g.sm_clock_mhz <= 1400
    assert 1050 <= median(g.sm_clock_mhz for c in ticks(samples, *late(name)) for g in c.gpus) <= 1250
    assert all(g.power_limit_watts == 700 for c in ticks(samples, *before(name)) for g in c.gpus)


def test_low_mfu_is_there_from_the_first_sample_with_busy_gpus():
    samples = run("low_mfu")
    tr = training(samples)
    assert len(tr) == len(samples)
    assert 0.12 <= median(s.mfu for s in tr) <= 0.15
    assert all(0.11 <= s.mfu <= 0.16 for s in tr[:5])
    assert median(g.utilization_percent for _, c in samples for g in c.gpus) >= 93
    assert all(s.step_time_ms > 0 and s.tokens_per_sec > 0 for s in tr)


def test_sequence_padding_is_there_from_the_first_sample():
    tr = training(run("sequence_padding"))
    ratios = [s.avg_seq_len / s.max_seq_len for s in tr]
    assert 0.25 <= median(ratios) <= 0.35 and all(r < 0.45 for r in ratios[:5])
    assert median(s.mfu for s in tr) < 0.2
    healthy_step = median(s.step_time_ms for s in training(run("healthy", 600)))
    assert median(s.step_time_ms for s in tr) == pytest.approx(healthy_step, rel=0.05)  # padding still computes


def test_tokenizer_stall_shows_in_tokenizer_wait_not_data_wait():
    name, samples = "tokenizer_stall", run("tokenizer_stall")
    tr = training(samples, *late(name))
    assert 0.30 <= share(tr, "tokenizer_wait_ms") <= 0.40
    assert median(s.data_wait_ms for s in tr) < 10
    assert share(training(samples, *before(name)), "tokenizer_wait_ms") < 0.01
    now = ticks(samples, *late(name))
    assert median(g.utilization_percent for c in now for g in c.gpus) < 75
    assert median(c.host.cpu_percent for c in now) > 70


def test_allreduce_wait_rises_uniformly_on_every_rank():
    name, samples = "allreduce_wait", run("allreduce_wait")
    was, tr = training(samples, *before(name)), training(samples, *late(name))

    def allreduce(tr: list[TrainingSample], rank: int) -> float:
        return median(s.ranks[rank].all_reduce_wait_ms for s in tr)

    assert all(3.0 <= allreduce(tr, rank) / allreduce(was, rank) <= 5.0 for rank in range(8))
    for s in tr:
        times = [r.all_reduce_wait_ms for r in s.ranks]
        assert max(times) / min(times) < 1.03  # uniform: no single slow link
    assert drop(name, "step_time_ms") < -0.1  # steps got longer
    util = lambda cs: median(g.utilization_percent for c in cs for g in c.gpus)  # noqa: E731
    assert util(ticks(samples, *late(name))) <= util(ticks(samples, *before(name))) - 4


def test_checkpoint_stall_blocks_training_with_idle_gpus_and_heavy_writes():
    name, samples = "checkpoint_stall", run("checkpoint_stall")
    onset = SCENARIOS[name].onset_s
    saved = [(t, c.training.checkpoint_ms) for t, c in samples if c.training and c.training.checkpoint_ms]
    assert len(saved) >= 4 and all(t > onset for t, _ in saved)
    assert all(15000 <= ms <= 40000 for _, ms in saved)
    assert all(30 <= b - a - ms_b / 1000 <= 60 for (a, _), (b, ms_b) in pairwise(saved))  # trains, then saves
    blocked = [c for t, c in samples if c.training is None]
    assert blocked and all(
        g.throttle_reasons == ("gpu_idle",) and g.utilization_percent == 0 for c in blocked for g in c.gpus
    )
    assert all(c.host.disk_write_bytes_per_sec > 1e9 for c in blocked)
    assert all(c.host.disk_write_bytes_per_sec < 2e8 for c in ticks(samples, 0, onset))


def test_pipeline_bubble_from_the_first_sample():
    samples = run("pipeline_bubble")
    tr = training(samples)
    assert (tr[0].pipeline_parallel_size, tr[0].data_parallel_size, tr[0].world_size) == (4, 2, 8)
    assert tr[0].global_batch_size == tr[0].micro_batch_size * tr[0].gradient_accumulation_steps * 2
    assert all(0.30 <= s.pipeline_bubble_ratio <= 0.45 for s in tr)
    assert 50 <= median(g.utilization_percent for _, c in samples for g in c.gpus) <= 65


def test_rank_straggler_is_rank5_slow_without_throttling():
    name, samples = "rank_straggler", run("rank_straggler")

    def ratio(s: TrainingSample) -> float:
        return s.ranks[5].step_time_ms / median(r.step_time_ms for r in s.ranks)

    assert sum(ratio(s) >= 1.2 for s in training(samples, *before(name))) <= 2  # a GC pause at most
    tr = training(samples, *late(name))
    ratios = [ratio(s) for s in tr]
    assert sum(r >= 1.25 for r in ratios) >= 0.95 * len(tr) and median(ratios) <= 1.45
    assert median(r.sync_wait_ms for s in tr for r in s.ranks if r.rank != 5) > 300
    assert median(s.ranks[5].sync_wait_ms for s in tr) < 0.25 * ALLREDUCE_MS  # the barrier's own cost alone
    now = ticks(samples, *late(name))
    assert all(c.gpus[5].throttle_reasons == () and c.gpus[5].sm_clock_mhz >= 1950 for c in now)
    assert median(c.gpus[5].utilization_percent for c in now) < median(c.gpus[0].utilization_percent for c in now)


def test_oom_risk_drains_host_memory_until_the_oom_kill_at_exhaust_s():
    scenario = SCENARIOS["oom_risk"]
    samples = run("oom_risk")
    onset, exhaust = scenario.onset_s, scenario.exhaust_s
    assert exhaust is not None and 600 <= exhaust - onset <= 900 and exhaust < scenario.duration_s
    draining = [(t, c.host.memory_available_bytes) for t, c in samples if onset + 10 <= t < exhaust - 60]
    rate = -slope(draining)
    assert rate >= 60e6 * 8  # a steady leak, many processes
    healthy_level = median(c.host.memory_available_bytes for c in ticks(samples, *before("oom_risk")))
    assert healthy_level / rate == pytest.approx(exhaust - onset, rel=0.05)  # linear forecast is right
    alive = [t for t, c in samples if c.training is not None]
    assert max(alive) < exhaust <= max(alive) + 1  # the first tick at/after exhaust_s has no training
    assert all(c.training is None for t, c in samples if t >= exhaust)
    swap = lambda lo, hi: max(c.host.swap_used_bytes for c in ticks(samples, lo, hi))  # noqa: E731
    assert swap(exhaust - 20, exhaust) > 4 * swap(0, exhaust - 120)  # swapping near the end
    after = ticks(samples, exhaust, scenario.duration_s)
    assert all(c.host.memory_available_bytes > healthy_level for c in after)  # freed
    assert all(g.utilization_percent == 0 and g.memory_used_bytes < 1e9 for c in after for g in c.gpus)


def test_thermal_throttle_risk_warms_gpu2_without_reaching_slowdown():
    name, samples = "thermal_throttle_risk", run("thermal_throttle_risk")
    onset, end = SCENARIOS[name].onset_s, SCENARIOS[name].duration_s
    temps = [(t, c.gpus[2].temperature_celsius) for t, c in samples]
    assert 64 <= median(x for t, x in temps if t < onset) <= 72
    per_second = slope([(t, x) for t, x in temps if t >= onset + 60])
    assert 1 / 20 <= per_second <= 1 / 10
    assert max(x for _, x in temps) < 86
    assert all(g.throttle_reasons == () for _, c in samples for g in c.gpus)
    for i in (0, 1, 3, 4, 5, 6, 7):
        late_temps = [c.gpus[i].temperature_celsius for c in ticks(samples, end - 60, end)]
        assert max(late_temps) <= 73


def test_gpu_memory_leak_fills_gpu3_until_cuda_oom():
    scenario = SCENARIOS["gpu_memory_leak"]
    samples = run("gpu_memory_leak")
    onset, exhaust = scenario.onset_s, scenario.exhaust_s
    leaking = [(t, c.gpus[3].memory_used_bytes) for t, c in samples if onset + 10 <= t < exhaust]
    assert slope(leaking) > 10e6
    assert max(b for _, b in leaking) > 0.99 * GPU_MEMORY_BYTES
    for i in (0, 1, 2, 4, 5, 6, 7):
        used = {c.gpus[i].memory_used_bytes for c in ticks(samples, 0, exhaust)}
        assert max(used) - min(used) < 10 * 2**20
    alive = [t for t, c in samples if c.training is not None]
    assert max(alive) < exhaust <= max(alive) + 1


# ------------------------------------------------------------------ the catalogue


def test_every_contract_signal_has_a_scenario_with_a_sound_answer_key():
    assert set(SIGNALS) <= set(SCENARIOS)
    assert SCENARIOS["healthy"].expected_signals == frozenset() and SCENARIOS["healthy"].expected_cause is None
    for name, s in SCENARIOS.items():
        assert s.name == name and s.description and "\n" not in s.description
        assert s.expected_signals <= set(SIGNALS) and s.allowed_signals <= set(SIGNALS)
        assert not s.expected_signals & s.allowed_signals
        if name in SIGNALS:
            assert name in s.expected_signals
        if name != "healthy":
            assert s.expected_cause in ROOT_CAUSES
        assert 0 <= s.onset_s < s.duration_s
        assert set(s.expected_subject) <= {"rank", "gpu_index", "hostname"}
        assert all(0 <= v < 8 for k, v in s.expected_subject.items() if k != "hostname")
    assert SCENARIOS["thermal_instability"].expected_subject == {"gpu_index": 5, "rank": 5}
    assert SCENARIOS["rank_straggler"].expected_subject == {"rank": 5, "gpu_index": 5}
    assert SCENARIOS["thermal_throttle_risk"].expected_subject == {"gpu_index": 2}


def test_every_knob_has_a_healthy_value_and_effects_are_checked():
    assert set(JOB_HEALTHY) == set(JOB_KNOBS)
    assert not set(JOB_KNOBS) & set(GPU_KNOBS)
    with pytest.raises(ValueError, match="unknown knob"):
        Effect("warp_drive", 1.0)
    with pytest.raises(ValueError, match="whole job"):
        Effect("power_cap_w", 300.0, gpus=(1,))
    ramp = Effect("cooling_loss", 2.0, gpus=(1,), ramp_s=10.0)
    assert [ramp.progress(t, 100.0) for t in (99.0, 100.0, 105.0, 200.0)] == [0.0, 0.0, 0.5, 1.0]
    assert Effect("power_cap_w", 300.0, onset_s=5.0).progress(5.0, 100.0) == 1.0


# ------------------------------------------------------------------ shapes and the collector


def test_many_ranks_live_on_other_hosts():
    node = SimulatedNode(ranks=64)
    s = node.sample(0.0)
    tr = s.training
    assert len(s.gpus) == 8 and tr.world_size == 64 and len(tr.ranks) == 64
    assert tr.global_batch_size == tr.micro_batch_size * tr.gradient_accumulation_steps * 64
    assert {(r.rank, r.gpu_index, r.hostname) for r in tr.ranks} == {
        (r, r % 8, f"node-{r // 8:03d}") for r in range(64)
    }
    assert 0.35 <= tr.mfu <= 0.5
    assert s.host.net_tx_bytes_per_sec > 1e9  # the inter-node all-reduce uses the NICs
    big = SimulatedNode("rank_straggler", ranks=4096).sample(100.0).training
    assert parse_training(to_dict(big)) == big and big.ranks[-1].hostname == "node-511"


@pytest.mark.parametrize("kwargs", [{"gpus": 0}, {"ranks": 4}, {"ranks": 4097}])
def test_bad_shapes_are_refused(kwargs):
    with pytest.raises(ValueError, match="must be"):
        SimulatedNode(**kwargs)


def test_unknown_scenario_names_the_known_ones():
    with pytest.raises(ValueError, match="known: healthy"):
        SimCollector("volcano")


def test_sim_collector_is_a_collector_driven_by_the_daemons_clock():
    collector = SimCollector("rank_straggler", seed=3, interval_s=2.0)
    assert isinstance(collector, Collector) and collector.name == "sim"
    node = SimulatedNode("rank_straggler", seed=3, interval_s=2.0, start_ts=5000.0)
    for now in (5000.0, 5002.0, 5004.0, 5010.5):
        got = collector.collect(now)
        assert got == node.sample(now - 5000.0)
        assert got.training.timestamp == now
    assert collector.describe()["scenario"] == "rank_straggler"
    collector.close()
