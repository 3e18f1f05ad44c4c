"""The pairs' answer key: a fault is excused only when the raw samples show it is not there."""

from __future__ import annotations

import pytest

from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.runtime.evaluate_pairs import fault_presence, run_pair
from trainpulse_otel.runtime.ground_truth import CHECKS, FORECAST_HORIZON_S, Presence
from trainpulse_otel.runtime.sim_replay import START_TS, judge_at, sim_records


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
    from trainpulse_otel.collect.sim.combine import combine

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
