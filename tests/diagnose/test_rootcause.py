"""Root-cause ranking: the deepest explanation first, with the right subject and a remediation."""

from __future__ import annotations

import random
import statistics

import pytest

from tests.diagnose.evidence import TS, causes, node, sig, straggler
from trainpulse_otel.diagnose import ROOT_CAUSES
from trainpulse_otel.diagnose.rootcause.ranks import sync_share
from trainpulse_otel.diagnose.types import Signal


def test_a_throttled_gpu_making_its_rank_a_straggler_is_thermal_first_then_the_straggler():
    hot = {
        "g5": {"last_thermal_ts": TS - 5, "thermal": 0.6, "clock_ratio": 0.74, "temp": 87.0, "reasons": ("sw_thermal",)}
    }
    got = causes(
        [straggler(), sig("sync_imbalance"), sig("thermal_instability", "critical", {"gpu_index": 5})], n=node(**hot)
    )
    assert [c.cause for c in got[:2]] == ["gpu_thermal_throttling", "straggler_rank"]
    assert got[0].subject == {"gpu_index": 5, "rank": 5}
    assert got[0].confidence > got[1].confidence
    assert {"thermal_instability", "rank_straggler", "sync_imbalance"} <= set(got[0].signals)
    assert "GPU 5" in got[0].summary and "cooling" in got[0].remediation


def test_a_throttled_straggler_gpu_without_a_thermal_signal_is_still_thermal():
    hot = {"g5": {"last_thermal_ts": TS - 20, "thermal": 0.3, "clock_ratio": 0.8}}
    got = causes([straggler(), sig("sync_imbalance")], n=node(**hot))
    assert got[0].cause == "gpu_thermal_throttling" and got[0].subject["gpu_index"] == 5


def test_a_straggler_on_a_healthy_gpu_is_the_straggler_with_the_host_side_hint():
    got = causes([straggler(), sig("sync_imbalance")], n=node(g5={"util": 73.0}))
    assert got[0].cause == "straggler_rank" and got[0].subject == {"rank": 5, "gpu_index": 5}
    assert "not throttled but idles more than its peers" in got[0].summary
    assert "sync_imbalance" in got[0].signals


def test_padding_that_explains_low_mfu_is_padding_waste_not_compute_inefficiency():
    got = causes([sig("sequence_padding", "critical", padding_ratio=0.71), sig("low_mfu")], facts={"low_mfu": 0.13})
    assert [c.cause for c in got] == ["padding_waste"]
    assert got[0].signals == ("sequence_padding", "low_mfu")
    assert "without the padding it would be ~0.45" in got[0].summary


def test_padding_that_cannot_explain_low_mfu_leaves_compute_inefficiency_too():
    got = causes([sig("sequence_padding", padding_ratio=0.3), sig("low_mfu")], facts={"low_mfu": 0.08})
    assert {c.cause for c in got} == {"padding_waste", "compute_inefficiency"}


def test_power_capping_on_all_gpus_that_collapses_throughput_is_power_throttling():
    capped = {f"g{i}": {"power_capped": 1.0, "clock_ratio": 0.56, "limit": 350.0} for i in range(8)}
    got = causes([sig("throughput_collapse"), sig("low_mfu")], facts={"throughput_drop": 0.44}, n=node(**capped))
    assert [c.cause for c in got] == ["gpu_power_throttling"]
    assert got[0].subject == {"gpu_indices": list(range(8))}
    assert "50% below the earlier 700 W" in got[0].summary and "throughput down 44%" in got[0].summary


def test_a_power_cap_explains_no_more_of_a_low_mfu_than_its_clocks_do():
    capped = {f"g{i}": {"power_capped": 1.0, "clock_ratio": 0.56, "limit": 350.0} for i in range(8)}
    signals = [sig("throughput_collapse"), sig("low_mfu", "critical")]
    # MFU 0.15 at 56 % clocks would be ~0.27 uncapped: the cap explains it
    got = causes(signals, facts={"throughput_drop": 0.44, "low_mfu": 0.15}, n=node(**capped))
    assert [c.cause for c in got] == ["gpu_power_throttling"] and "low_mfu" in got[0].signals
    # MFU 0.08 would be ~0.14 uncapped, still low: a second fault (a mis-configured job) is left to explain
    got = causes(signals, facts={"throughput_drop": 0.44, "low_mfu": 0.08}, n=node(**capped))
    assert {c.cause for c in got} == {"gpu_power_throttling", "compute_inefficiency"}
    assert "low_mfu" not in next(c for c in got if c.cause == "gpu_power_throttling").signals


def test_power_capping_with_no_performance_problem_is_no_cause():
    capped = {f"g{i}": {"power_capped": 1.0, "clock_ratio": 0.9} for i in range(8)}
    assert (
        causes([sig("thermal_throttle_risk", subject={"gpu_index": 1})], n=node(**capped))[0].cause
        == "gpu_thermal_throttling"
    )


def test_idle_gpus_with_no_wait_to_blame_are_compute_inefficiency_launch_bound():
    got = causes([sig("gpu_underutilization", median_utilization_percent=42.0), sig("throughput_collapse")])
    assert got[0].cause == "compute_inefficiency" and "launch" in got[0].summary


def test_data_starvation_explains_idle_gpus_and_reads_the_host_cpu():
    n = node()
    n.host.cpu = 96.0
    got = causes(
        [
            sig("dataloader_starvation", "critical", data_wait_ms_share=0.42),
            sig("gpu_underutilization", median_utilization_percent=56.0),
        ],
        n=n,
    )
    assert [c.cause for c in got] == ["input_pipeline_bound"]
    assert "CPU-bound" in got[0].remediation
    n.host.cpu = 30.0
    assert "storage" in causes([sig("dataloader_starvation")], n=n)[0].remediation


def test_imbalance_without_a_consistent_straggler_is_load_imbalance():
    assert causes([sig("sync_imbalance")])[0].cause == "load_imbalance"
    assert all(c.cause != "load_imbalance" for c in causes([sig("sync_imbalance"), straggler()]))


def test_a_gpu_leak_is_gpu_memory_pressure_on_that_gpu_above_its_straggler():
    leak = sig("oom_risk", "critical", {"gpu_index": 3}, eta_s=300.0, rate_fraction_per_s=0.0003)
    got = causes([leak, straggler(3)], n=node(g3={"mem_frac": 0.97}))
    assert got[0].cause == "gpu_memory_pressure" and got[0].subject == {"gpu_index": 3, "rank": 3}
    assert got[1].cause == "straggler_rank"
    assert "rank 3" in got[0].remediation


def test_a_host_leak_is_host_memory_pressure_with_its_eta():
    leak = sig("oom_risk", "critical", {"hostname": "node-000"}, eta_s=540.0, rate_fraction_per_s=-0.001)
    got = causes([leak, sig("memory_pressure", subject={"hostname": "node-000"})])
    assert got[0].cause == "host_memory_pressure" and got[0].subject == {"hostname": "node-000"}
    assert "~9 min" in got[0].summary


def test_each_waiting_signal_maps_to_its_cause():
    for signal, cause in [
        ("tokenizer_stall", "tokenizer_bound"),
        ("allreduce_wait", "communication_bound"),
        ("checkpoint_stall", "checkpoint_io_bound"),
        ("pipeline_bubble", "pipeline_bubbles"),
    ]:
        got = causes([sig(signal), sig("gpu_underutilization", median_utilization_percent=60.0)])
        assert [c.cause for c in got] == [cause], signal
        assert got[0].remediation and got[0].confidence > 0.5


def test_every_cause_is_a_contract_name_and_no_signals_means_no_causes():
    everything = [
        sig(n)
        for n in (
            "throughput_collapse",
            "gpu_underutilization",
            "low_mfu",
            "sync_imbalance",
            "dataloader_starvation",
            "tokenizer_stall",
            "allreduce_wait",
            "checkpoint_stall",
            "pipeline_bubble",
            "sequence_padding",
        )
    ] + [straggler()]
    got = causes(everything)
    assert got and all(c.cause in ROOT_CAUSES for c in got)
    assert [c.confidence for c in got] == sorted((c.confidence for c in got), reverse=True)
    assert causes([]) == ()


def test_most_gpus_overheating_together_is_one_node_cooling_cause():
    risks = [sig("thermal_throttle_risk", subject={"gpu_index": g}, eta_s=400.0) for g in range(8)]
    got = causes(risks, n=node(**{f"g{g}": {"temp": 80.0 + g % 2} for g in range(8)}))
    assert [c.cause for c in got] == ["gpu_thermal_throttling"]
    assert got[0].subject == {"gpu_indices": list(range(8)), "ranks": list(range(8))}
    assert "8 of 8 GPUs overheat together (up to 81 °C)" in got[0].summary
    assert "room" in got[0].remediation


# ------------------------------------------------------------------ ranked by the lost time each explains


def test_a_wait_every_rank_pays_is_not_imbalance_the_all_reduce_that_grew_is_the_cause():
    """All-reduce 6 -> 75 ms on every rank: the sync wait hardly moved, the all-reduce explains the lost time."""
    got = causes([sig("sync_imbalance"), sig("allreduce_wait")], losses={"all_reduce": 0.036, "sync": 0.002})
    assert [c.cause for c in got] == ["communication_bound", "load_imbalance"]
    assert got[0].confidence == pytest.approx(0.036 / 0.038) and got[1].confidence == pytest.approx(0.002 / 0.038)


def test_a_tokenizer_wait_inside_the_loaders_wait_makes_the_tokenizer_first():
    got = causes([sig("dataloader_starvation"), sig("tokenizer_stall")], losses={"tokenizer": 0.20, "data": 0.03})
    assert [c.cause for c in got[:2]] == ["tokenizer_bound", "input_pipeline_bound"]


def test_two_faults_at_once_rank_by_the_share_each_explains():
    hot = {
        "g5": {"last_thermal_ts": TS - 5, "thermal": 0.6, "clock_ratio": 0.74, "temp": 87.0, "reasons": ("sw_thermal",)}
    }
    signals = [
        straggler(),
        sig("sync_imbalance"),
        sig("thermal_instability", "critical", {"gpu_index": 5}),
        sig("dataloader_starvation", data_share=0.3),
    ]
    got = causes(signals, n=node(**hot), losses={"sync": 0.10, "data": 0.25, "compute": 0.01})
    assert [c.cause for c in got[:2]] == ["input_pipeline_bound", "gpu_thermal_throttling"]
    assert got[0].confidence == pytest.approx(0.25 / 0.36) and got[1].confidence == pytest.approx(0.11 / 0.36)
    assert got[2].cause == "straggler_rank" and got[2].confidence == 0.0  # its consequence adds no time of its own
    assert got[2].evidence["explained_by"] == ["gpu_thermal_throttling"]  # and says what explains it


def test_lost_compute_that_no_wait_explains_keeps_its_own_cause():
    """Checkpoints "explain" idle GPUs, but not the slower steps between saves."""
    signals = [sig("checkpoint_stall"), sig("gpu_underutilization", median_utilization_percent=55.0)]
    got = causes(signals, losses={"checkpoint": 0.44, "compute": 0.29})
    assert [c.cause for c in got] == ["checkpoint_io_bound", "compute_inefficiency"]
    assert got[1].confidence == pytest.approx(0.29 / 0.73)
    assert [c.cause for c in causes(signals, losses={"checkpoint": 0.44})] == ["checkpoint_io_bound"]


def test_before_the_job_loses_time_causes_rank_by_their_evidence():
    got = causes([sig("allreduce_wait", "critical"), sig("sync_imbalance")], losses={"all_reduce": 0.005})
    assert got[0].cause == "communication_bound" and got[0].confidence == pytest.approx(0.75)


def test_a_forecast_beside_a_measured_fault_keeps_the_strength_of_its_evidence():
    risk = sig("thermal_throttle_risk", subject={"gpu_index": 2}, eta_s=600.0)
    got = causes([sig("dataloader_starvation", "critical", data_wait_share=0.4), risk], losses={"data": 0.3})
    assert [c.cause for c in got] == ["input_pipeline_bound", "gpu_thermal_throttling"]
    assert got[0].confidence == pytest.approx(1.0, abs=0.05)  # all of the lost time
    assert got[1].confidence == pytest.approx(0.6)  # nothing lost yet: a warning's evidence


def test_checkpoint_saves_between_steps_do_not_explain_a_low_mfu():
    stall = sig("checkpoint_stall", "critical", blocked_share=0.49)
    got = causes([stall, sig("low_mfu")], facts={"low_mfu": 0.14}, losses={"checkpoint": 0.4, "compute": 0.02})
    assert [c.cause for c in got] == ["checkpoint_io_bound", "compute_inefficiency"]
    assert got[0].signals == ("checkpoint_stall",)


def scattered_straggler(slower: float, scatter: float, others_last: float, severity: str = "critical") -> Signal:
    """A straggler ``slower`` than the median, the others scattering with relative sigma ``scatter`` and the last
    of them ``others_last`` after the median."""
    others = {"others_scatter": scatter, "others_last_excess": others_last}
    return sig("rank_straggler", severity, {"rank": 5, "gpu_index": 5}, slower_than_median=slower, **others)


def test_a_straggler_among_ranks_that_also_scatter_leaves_load_imbalance_beside_it():
    sync = sig("sync_imbalance", "critical", median_sync_wait_ms=488.0, least_sync_wait_ms=20.0)
    got = causes([scattered_straggler(0.6, 0.22, 0.3), sync], losses={"sync": 0.25})
    assert [c.cause for c in got][:2] == ["straggler_rank", "load_imbalance"]
    tight = sig("rank_straggler", "critical", {"rank": 5, "gpu_index": 5}, others_scatter=0.01)
    got = causes([tight, sync], losses={"sync": 0.25})
    assert [c.cause for c in got] == ["straggler_rank"] and "sync_imbalance" in got[0].signals


def test_the_sync_wait_is_split_by_what_the_straggler_adds_beyond_the_others_own_scatter():
    # a real 4-rank gloo job on a loaded 2-core machine: rank 2 23.5 % slower, the others scattering 12 %; the
    # job-wide sync_imbalance critical, the straggler a warning: the straggler still explains most of the wait
    sync = sig("sync_imbalance", "critical")
    slow = scattered_straggler(0.235, 0.12, 0.1, severity="warning")  # the last of the others 10 % after the median
    got = causes([slow, sync], losses={"sync": 0.2})
    assert [c.cause for c in got] == ["straggler_rank", "load_imbalance"]
    assert got[0].confidence == pytest.approx(sync_share(slow)) and 0.55 < got[0].confidence < 0.65
    assert got[0].confidence + got[1].confidence == pytest.approx(1.0)  # the sync wait, split
    assert f"{sync_share(slow):.0%} of the ranks' wait" in got[0].summary
    assert f"({1 - sync_share(slow):.0%} of that wait)" in got[1].summary
    # a rank no later on average than the last of the others explains little of their wait: imbalance first
    got = causes([scattered_straggler(0.15, 0.25, 0.34), sync], losses={"sync": 0.2})
    assert [c.cause for c in got] == ["load_imbalance", "straggler_rank"]
    assert 0.05 < got[1].confidence < 0.25


@pytest.mark.parametrize(
    ("ranks", "slower", "scatter"), [(4, 0.3, 0.08), (4, 0.235, 0.12), (8, 0.36, 0.25), (8, 0.15, 0.25), (64, 0.3, 0.1)]
)
def test_a_stragglers_share_of_the_sync_wait_is_what_removing_it_saves(ranks, slower, scatter):
    # per step every rank's work scatters alike and one rank's is ``slower`` longer; the ranks wait for the last
    rng = random.Random(ranks)
    with_it = without = 0.0
    last_of_others = []
    for _ in range(3000):
        others = [1.0 + scatter * rng.gauss(0.0, 1.0) for _ in range(ranks - 1)]
        arrivals = [*others, (1.0 + slower) * (1.0 + scatter * rng.gauss(0.0, 1.0))]
        median = statistics.median(arrivals)
        with_it += max(arrivals) - median
        without += max(others) - median
        last_of_others.append(max(others) / median - 1.0)
    saved = (with_it - without) / with_it
    evidence = {"others_scatter": scatter, "others_last_excess": statistics.fmean(last_of_others)}
    straggler = sig("rank_straggler", subject={"rank": 5}, slower_than_median=slower, **evidence)
    assert sync_share(straggler) == pytest.approx(saved, abs=0.05)


def test_a_throttled_gpu_behind_a_straggler_among_scattering_ranks_explains_only_the_stragglers_part():
    # GPU 5 throttles and makes rank 5 late, while every rank's work also scatters: the throttle explains the
    # wait its rank adds, the others' own imbalance the rest; it neither masks load_imbalance nor takes its share
    hot = {
        "g5": {"last_thermal_ts": TS - 5, "thermal": 0.6, "clock_ratio": 0.74, "temp": 87.0, "reasons": ("sw_thermal",)}
    }
    slow = scattered_straggler(0.235, 0.12, 0.1)
    signals = [slow, sig("sync_imbalance", "critical"), sig("thermal_instability", "critical", {"gpu_index": 5})]
    got = causes(signals, n=node(**hot), losses={"sync": 0.2})
    assert [c.cause for c in got] == ["gpu_thermal_throttling", "load_imbalance", "straggler_rank"]
    assert got[0].confidence == pytest.approx(sync_share(slow))
    assert got[1].confidence == pytest.approx(1.0 - sync_share(slow))
    assert "sync_imbalance" not in got[0].signals  # the whole wait is not the throttle's


def test_a_recovering_spike_ranks_by_its_evidence_among_measured_causes():
    spike = sig("loss_spike", "warning", {})
    slow = scattered_straggler(0.235, 0.12, 0.1)
    got = causes([spike, slow, sig("sync_imbalance", "critical")], losses={"sync": 0.2})
    names = {c.cause: c.confidence for c in got}
    assert names["numerical_instability"] > 0.5  # a spike loses no step time: it ranks by its own evidence
    assert all(round(confidence, 2) > 0 for confidence in names.values())  # and none of them at 0 %
