"""Faults combined (``-scenario a,b``): both faults in the samples, one onset shift, conflicts named."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import replace

import pytest

from trainpulse_otel.cli import main
from trainpulse_otel.collect.sim import JOB_HEALTHY, SimCollector, SimulatedNode
from trainpulse_otel.collect.sim.combine import ADDITIVE_KNOBS, check_scenario, combine, scenario_named
from trainpulse_otel.collect.sim.knobs import Knobs
from trainpulse_otel.collect.sim.scenarios import SCENARIOS, Effect
from trainpulse_otel.config import ConfigError, load_settings

PAIR = "rank_straggler,dataloader_starvation"


def late_reports(spec: str, until: float = 240.0) -> list:
    """The training reports of the last minute of a run of ``until`` seconds."""
    node = SimulatedNode(spec)
    got = [node.sample(float(t)) for t in range(int(until))]
    return [c.training for c in got[-60:] if c.training is not None]


def test_a_straggler_and_a_starving_loader_both_show_in_the_samples():
    reports = late_reports(PAIR)
    rank5 = [r.ranks[5].step_time_ms / statistics.median(x.step_time_ms for x in r.ranks) for r in reports]
    data_share = [r.data_wait_ms / r.step_time_ms for r in reports]
    assert statistics.median(rank5) >= 1.25  # rank 5 slow, as alone
    assert statistics.median(data_share) >= 0.25  # and the loader starving every rank
    alone = late_reports("dataloader_starvation")
    assert statistics.median(r.data_wait_ms for r in reports) == pytest.approx(
        statistics.median(r.data_wait_ms for r in alone), rel=0.25
    )


def test_a_gpu_that_falls_off_the_bus_beside_a_lost_node_falls_off_this_node_only():
    node = SimulatedNode("node_unreachable,gpu_hardware_fault")
    ticks = [node.sample(float(t)) for t in range(150)]
    own_xids = [code for c in ticks for g in c.gpus if g.index == 4 for code in g.xid_errors or ()]
    assert own_xids == [79]  # this node's GPU 4 falls off the bus once
    assert 4 not in {g.index for g in ticks[-1].gpus}
    peers = [g for c in ticks for peer in c.nodes for g in peer.gpus if g.index == 4]
    assert peers and all(not g.xid_errors and g.utilization_percent is not None for g in peers)


def test_before_the_earliest_onset_a_combination_is_the_healthy_run():
    combined, healthy = SimulatedNode(PAIR), SimulatedNode("healthy")
    assert [combined.sample(float(t)) for t in range(90)] == [healthy.sample(float(t)) for t in range(90)]


def test_each_part_keeps_its_own_onset_and_onset_moves_them_all():
    scenario = combine(SCENARIOS["low_mfu"], SCENARIOS["rank_straggler"])
    assert scenario.name == "low_mfu,rank_straggler" and scenario.onset_s == 0.0
    starts = {e.knob: e.start(scenario.onset_s) for e in scenario.effects}
    assert starts["flop_efficiency"] == 0.0 and starts["rank_slowdown"] == 90.0
    moved = scenario.starting_at(30.0)
    starts = {e.knob: e.start(moved.onset_s) for e in moved.effects}
    assert starts["flop_efficiency"] == 30.0 and starts["rank_slowdown"] == 120.0
    assert [p.onset_s for p in moved.parts] == [30.0, 120.0]
    assert SimCollector(scenario, onset_s=30.0).describe() | {"seed": 0} == SimCollector(
        "low_mfu,rank_straggler", onset_s=30.0
    ).describe() | {"seed": 0}


def test_expectations_are_the_union_of_the_parts():
    scenario = scenario_named("thermal_instability,sequence_padding")
    assert scenario.expected_signals == {"thermal_instability", "sequence_padding"}
    assert {"rank_straggler", "low_mfu"} <= scenario.allowed_signals
    assert scenario.expected_causes == ("gpu_thermal_throttling", "padding_waste")
    assert scenario.job == {"packing": False, "mean_doc_len": 1200.0}
    assert scenario.duration_s == 300.0 and scenario.exhaust_s is None
    assert scenario_named("oom_risk,rank_straggler").exhaust_s == SCENARIOS["oom_risk"].exhaust_s


@pytest.mark.parametrize("t", [0.0, 95.0, 100.0, 110.0, 111.0, 140.0, 179.0, 180.0, 400.0])
def test_an_extra_load_two_parts_add_is_their_sum(t):
    healthy = Knobs.healthy([0.75] * 8)
    parts = [SCENARIOS["dataloader_starvation"], SCENARIOS["rank_straggler"]]
    combined = healthy.at(combine(*parts), t).host_cpu_percent
    assert combined == pytest.approx(sum(healthy.at(p, t).host_cpu_percent for p in parts))
    assert all(JOB_HEALTHY[knob] == 0.0 for knob in ADDITIVE_KNOBS)  # the sum starts from a healthy 0


def test_a_step_and_a_ramp_on_an_additive_knob_add_up():
    step = replace(SCENARIOS["rank_straggler"], name="a", effects=(Effect("host_cpu_percent", 10.0, onset_s=50.0),))
    ramp = replace(SCENARIOS["allreduce_wait"], name="b", effects=(Effect("host_cpu_percent", 20.0, ramp_s=40.0),))
    combined, healthy = combine(step, ramp), Knobs.healthy([0.75])
    for t in (49.9, 50.0, 89.0, 90.0, 110.0, 130.0, 500.0):
        expected = sum(healthy.at(p, t).host_cpu_percent for p in (step, ramp))
        assert healthy.at(combined, t).host_cpu_percent == pytest.approx(expected)


#: Variants of one fault (the same knob on the same GPU): not a pair; what they both set.
VARIANTS_OF_ONE_FAULT = {
    ("training_stalled", "training_stalled_no_heartbeat"): "rank_hang on GPU 3",
    ("gpu_memory_leak", "out_of_memory"): "gpu_memory_leak on GPU 3",
}


def test_every_pair_of_catalogue_faults_combines():
    faults = [n for n in SCENARIOS if n != "healthy"]
    for i, a in enumerate(faults):
        for b in faults[i + 1 :]:
            if (a, b) in VARIANTS_OF_ONE_FAULT:
                with pytest.raises(ValueError, match=f"both set {VARIANTS_OF_ONE_FAULT[a, b]}"):
                    combine(SCENARIOS[a], SCENARIOS[b])
                continue
            assert combine(SCENARIOS[a], SCENARIOS[b]).parts == (SCENARIOS[a], SCENARIOS[b])


def test_the_same_job_key_set_differently_is_a_conflict_naming_both():
    packed = replace(SCENARIOS["pipeline_bubble"], name="packed", job={"packing": True})
    with pytest.raises(ValueError, match=r"'sequence_padding' and 'packed' conflict: .*packing"):
        combine(SCENARIOS["sequence_padding"], packed)


def test_the_same_knob_on_the_same_gpu_is_a_conflict_naming_both():
    fan = replace(SCENARIOS["thermal_throttle_risk"], name="fan5", effects=(Effect("cooling_loss", 2.0, gpus=(5, 6)),))
    with pytest.raises(ValueError, match="'thermal_instability' and 'fan5' conflict: both set cooling_loss on GPU 5"):
        combine(SCENARIOS["thermal_instability"], fan)
    everywhere = replace(fan, name="cap", effects=(Effect("power_cap_w", 300.0),))
    with pytest.raises(ValueError, match="'throughput_collapse' and 'cap' conflict: both set power_cap_w"):
        combine(SCENARIOS["throughput_collapse"], everywhere)
    assert combine(SCENARIOS["thermal_instability"], SCENARIOS["thermal_throttle_risk"])  # GPU 5 and GPU 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [("rank_straggler,rank_straggler", "named twice"), ("healthy,rank_straggler", "no fault"), ("a,b", "unknown")],
)
def test_a_combination_that_cannot_run_is_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        scenario_named(spec)


def test_scenario_a_b_through_flag_env_and_file(tmp_path):
    assert load_settings(flags={"scenario": PAIR}, environ={}).scenario == PAIR
    assert load_settings(environ={"TRAINPULSE_SCENARIO": PAIR}).scenario == PAIR
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"scenario": PAIR}))
    assert load_settings(environ={}, config_path=str(cfg)).scenario == PAIR


@pytest.mark.parametrize("spec", ["rank_straggler,", "a b", "Rank_Straggler"])
def test_a_malformed_scenario_is_a_config_error_naming_the_key(spec):
    with pytest.raises(ConfigError, match=r"^scenario: "):
        load_settings(flags={"scenario": spec}, environ={})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("volcano", "unknown scenario 'volcano'; known: .*rank_straggler"),
        ("rank_straggler,volcano", "unknown scenario 'volcano'"),
        ("rank_straggler,rank_straggler", "named twice"),
        ("healthy,rank_straggler", "no fault"),
    ],
)
def test_check_scenario_refuses_what_the_simulator_cannot_run_naming_it(spec, message):
    with pytest.raises(ConfigError, match=message) as info:
        check_scenario(spec)
    assert info.value.key == "scenario"


def test_check_scenario_accepts_a_name_and_a_combination():
    check_scenario("healthy")
    check_scenario(PAIR)


def test_snapshot_runs_a_combination(capsys, monkeypatch):
    for key in [k for k in os.environ if k.startswith("TRAINPULSE_")]:
        monkeypatch.delenv(key)
    assert main(["snapshot", "-mode", "sim", "-warmup", "2m", "-scenario", PAIR]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert len(snap["gpus"]) == 8 and len(snap["training"]["ranks"]) == 8
    names = {s["name"] for s in snap["diagnosis"]["signals"]}
    assert {"rank_straggler", "dataloader_starvation"} <= names
