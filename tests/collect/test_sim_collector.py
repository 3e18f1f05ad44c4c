"""The sim collector's two settings from the running daemon: ``-onset``, and real training reports winning."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from trainpulse_otel.collect.sim import RealReports, SimCollector, SimulatedNode
from trainpulse_otel.collect.sim.scenarios import SCENARIOS, Effect
from trainpulse_otel.config import ConfigError, load_settings

T0 = 5000.0


def test_onset_moves_the_whole_fault_and_before_it_the_run_is_the_healthy_one():
    moved = SimCollector("rank_straggler", onset_s=12.0)
    healthy = SimulatedNode("healthy", start_ts=T0)
    for t in range(12):
        assert moved.collect(T0 + t) == healthy.sample(float(t))
    after = [moved.collect(T0 + t).training for t in range(12, 60)][-10:]  # past the 20 s ramp
    for report in after:
        rank5 = report.ranks[5].step_time_ms
        others = sorted(r.step_time_ms for r in report.ranks if r.rank != 5)
        assert rank5 > 1.25 * others[len(others) // 2]
    assert moved.describe()["onset_s"] == 12.0


def test_without_onset_the_scenario_keeps_its_own():
    assert SimCollector("rank_straggler").describe()["onset_s"] == SCENARIOS["rank_straggler"].onset_s == 90.0


def test_starting_at_shifts_effects_with_their_own_onsets_and_keeps_job_overrides():
    scenario = SCENARIOS["sequence_padding"]
    effects = (Effect("data_wait_frac", 0.2), Effect("tokenizer_frac", 0.1, onset_s=120.0))
    staged = replace(scenario, onset_s=90.0, effects=effects)
    moved = staged.starting_at(10.0)
    assert moved.onset_s == 10.0
    assert [e.start(moved.onset_s) for e in moved.effects] == [10.0, 40.0]
    assert moved.job == scenario.job  # a mis-configured job stays so from the first sample


def test_onset_is_a_setting_like_every_other():
    assert load_settings(environ={}).onset is None
    assert load_settings(flags={"onset": "30s"}, environ={}).onset == 30.0
    assert load_settings(environ={"TRAINPULSE_ONSET": "2m"}).onset == 120.0
    with pytest.raises(ConfigError, match="onset"):
        load_settings(flags={"onset": "soon"}, environ={})


def test_the_simulated_training_loop_stands_down_while_real_reports_arrive(caplog):
    reports = RealReports(stale_after_s=5.0)
    collector = SimCollector("healthy", reports=reports)
    node = SimulatedNode("healthy", start_ts=T0)
    caplog.set_level(logging.INFO, logger="trainpulse_otel.collect.sim")
    assert collector.collect(T0) == node.sample(0.0)
    reports.arrived(T0 + 1.2)  # ingested while the next tick runs: it counts for that tick
    seen = [(t, collector.collect(T0 + t)) for t in range(1, 9)]
    for t, got in seen:
        expected = node.sample(float(t))  # the node goes on: its GPUs, host and random stream unchanged
        assert got.gpus == expected.gpus and got.host == expected.host
    assert [t for t, got in seen if got.training is None] == [1, 2, 3, 4, 5, 6]  # resumes 5 s after the last
    messages = [r.getMessage() for r in caplog.records]
    assert sum("stands down" in m for m in messages) == 1
    assert sum("no real training report for 5s: the simulated training loop resumes" in m for m in messages) == 1


def test_a_real_report_replaces_the_simulated_job_view_ranks_and_all():
    from tests import parts
    from trainpulse_otel.config import Settings
    from trainpulse_otel.samples import parse_training

    clock = [T0]
    engine = parts.engine(Settings(mode="sim"), clock=lambda: clock[0])
    try:
        for _ in range(3):
            engine.tick()
            clock[0] += 1.0
        assert len(engine.snapshot().training.ranks) == 8  # the simulated job's
        engine.ingest(
            parse_training(
                {
                    "model_name": "mine",
                    "step_time_ms": 500.0,
                    "ranks": [{"rank": 0, "step_time_ms": 490.0}, {"rank": 1, "step_time_ms": 495.0}],
                }
            )
        )
        engine.tick()
        training = engine.snapshot().training
        assert training.model_name == "mine" and [r.rank for r in training.ranks] == [0, 1]
        assert len(engine.snapshot().gpus) == 8  # the simulated GPUs go on
    finally:
        engine.close()
