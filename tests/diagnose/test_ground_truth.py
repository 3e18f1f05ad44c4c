"""The pairs' answer key: a fault is excused only when the raw samples show it is not there."""

from __future__ import annotations

import pytest

from trainpulse_otel.collect.sim.combine import combine
from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.collect.trace import TraceRecord
from trainpulse_otel.evaluation.ground_truth import CHECKS, FORECAST_HORIZON_S, Presence, loaded_seconds
from trainpulse_otel.evaluation.pairs import fault_presence, run_pair
from trainpulse_otel.evaluation.sim_replay import START_TS, judge_at, sim_records
from trainpulse_otel.samples import GpuSample


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_checked_fault_alone_is_present_in_its_samples(name):
    scenario = SCENARIOS[name]
    records = list(sim_records(scenario, 0, scenario.duration_s + FORECAST_HORIZON_S))
    healthy = lambda: list(sim_records(SCENARIOS["healthy"], 0, scenario.duration_s))  # noqa: E731
    judge = START_TS + judge_at(scenario, scenario.duration_s, 1.0)
    presence = CHECKS[name](records, healthy, START_TS + scenario.onset_s, judge, dict(scenario.expected_subject))
    assert presence == Presence(True, True, "")


def test_a_healthy_job_shows_none_of_the_checked_faults():
    scenario = SCENARIOS["healthy"]
    records = list(sim_records(scenario, 0, 600.0 + FORECAST_HORIZON_S))
    subject = {"gpu_index": 5, "rank": 5}
    for name, check in CHECKS.items():
        presence = check(records, lambda: records, START_TS + 60.0, START_TS + 600.0, subject)
        assert not presence.ever and not presence.at_judge and presence.reason, name


def test_a_starved_gpu_that_never_throttles_is_excused_with_its_reason_and_the_other_fault_still_scored():
    result = run_pair(("dataloader_starvation", "thermal_instability"))
    assert set(result.absent) == {"thermal_instability"}
    assert "GPU 5 does not throttle for heat" in result.absent["thermal_instability"]
    assert result.expected_causes == ["input_pipeline_bound"] and result.causes_ok
    assert set(result.latency_s) == {"dataloader_starvation"}


def test_faults_no_partner_removes_are_never_excused():
    scenario = combine(SCENARIOS["dataloader_starvation"], SCENARIOS["checkpoint_stall"])
    assert all(p == Presence(True, True, "") for p in fault_presence(scenario, 0, None, 1.0).values())


def test_a_fault_in_the_steps_of_a_job_that_stopped_is_excused_and_a_transient_one_is_judged_while_it_lasts():
    stopped = run_pair(("dataloader_starvation", "gpu_hardware_fault"))  # GPU 4 off the bus: no step after 90 s
    assert "no step after it begins" in stopped.absent["dataloader_starvation"]
    assert stopped.expected_causes == ["gpu_hardware_failure"] and stopped.causes_ok
    over = run_pair(("dataloader_starvation", "loss_spike"))  # the spike recovers long before the 300 s end
    assert over.absent == {"loss_spike": "the loss is back to its level"}
    assert "loss_spike" in over.latency_s and over.detected  # its signal was still due, and raised
    assert over.expected_causes == ["input_pipeline_bound"]


def test_a_gpus_load_is_the_time_it_drew_half_its_power_limit_or_more():
    def at(t: int, watts: float) -> TraceRecord:
        gpus = [GpuSample(index=i, power_watts=watts if i == 2 else 640.0, power_limit_watts=700.0) for i in (1, 2)]
        return TraceRecord(0, START_TS + t, "gpus", gpus)

    watts = [640.0] * 50 + [125.0] * 100 + [640.0] * 31  # busy, spinning in a hang at low power, busy again
    records = [at(t, w) for t, w in enumerate(watts)]
    assert loaded_seconds(records, 2, START_TS, START_TS + 180) == 80.0
    assert loaded_seconds(records, 1, START_TS + 60, START_TS + 180) == 120.0


def test_a_forecast_its_gpu_had_too_little_load_to_make_is_scored_as_either_heat_signal():
    # the hang leaves GPU 2 spinning at ~125 W for 3 minutes: 30 s of load after the onset, 30 s at the end
    result = run_pair(("thermal_throttle_risk", "training_stalled"))
    assert "GPU 2 drew its load for 60 s after the onset" in result.scored_instead["thermal_throttle_risk"]
    assert set(result.latency_s["thermal_throttle_risk"]) == {"thermal_throttle_risk or thermal_instability"}
    assert "thermal_throttle_risk" not in result.absent and "thermal_instability" not in result.extra
    assert result.expected_causes == ["gpu_thermal_throttling"]  # the fault is there: its cause is still due


def test_a_duty_cycled_gpu_still_owes_its_forecast():
    scenario = combine(SCENARIOS["checkpoint_stall"], SCENARIOS["thermal_throttle_risk"])
    # 36-s busy spells between 26-s saves: minutes of load in all, so the forecast itself is due
    assert fault_presence(scenario, 0, None, 1.0)["thermal_throttle_risk"] == Presence(True, True, "")


def test_a_fault_the_jobs_processes_make_is_excused_once_torchrun_has_ended_them():
    # the IB link fails at 90 s and the job is down at 99 s: GPU memory never fills, the link's cause is scored
    result = run_pair(("memory_pressure", "network_error"))
    assert result.absent == {"memory_pressure": "the job's processes are gone within a minute of it"}
    assert (
        result.expected_causes == ["network_failure"] and result.causes_ok and "memory_pressure" not in result.latency_s
    )


def test_a_logged_fault_is_there_when_its_line_was_printed_and_due_while_its_signal_holds():
    long = fault_presence(combine(SCENARIOS["oom_risk"], SCENARIOS["collective_timeout"]), 0, None, 1.0)
    timeout = long["collective_timeout"]  # printed at ~152 s, judged at 779 s: past the 600 s a logged failure holds
    assert timeout.ever and not timeout.at_judge and "older than the 600 s it holds" in timeout.reason
    stalled = fault_presence(combine(SCENARIOS["gpu_hardware_fault"], SCENARIOS["rank_crashed"]), 0, None, 1.0)
    assert stalled["rank_crashed"] == Presence(False, False, "the job prints no crash line of rank 1 after the onset")
    assert stalled["gpu_hardware_fault"] == Presence(True, True, "")


def test_a_narrow_link_whose_straggler_a_power_cap_masks_is_scored_by_the_link_alone():
    # the cap slows every rank alike: rank 7 is no slower, but GPU 7's link still reports x8 of x16
    result = run_pair(("throughput_collapse", "link_degradation"))
    assert "rank 7 is no slower than the others" in result.scored_instead["link_degradation"]
    assert set(result.latency_s["link_degradation"]) == {"link_degradation"} and result.detected
    assert "interconnect_degradation" in result.top_causes and result.causes_ok
