"""A job's life kept across a daemon's restart: the pipeline's state, saved as JSON and restored into a new
pipeline, continues the attempts, the goodput and the ETTR with nothing counted twice."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.diagnose.builders import T0, job
from trainpulse_otel.diagnose import DiagnosticPipeline
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import WORKERS_RESTARTED, LogEvent

PLUGINS = discover(autoload=False)


def report(step: int, saved: bool = False) -> dict:
    return {"global_step": step, "step_time_ms": 1000.0, **({"checkpoint_ms": 2000.0} if saved else {})}


def feed(pipeline: DiagnosticPipeline, times: range, first_step: int) -> dict:
    """Steps a second apart from ``first_step`` at each of ``times`` (a save every 10th); the goodput after."""
    result = None
    for i, t in enumerate(times):
        step = first_step + i
        result = pipeline.update(job(float(t), training=report(step, saved=step % 10 == 0)))
    assert result is not None and result.diagnosis.goodput is not None
    return result.diagnosis.goodput.to_dict()


def restarted(pipeline: DiagnosticPipeline) -> DiagnosticPipeline:
    """A new daemon's pipeline, continuing ``pipeline``'s life from its state through JSON (as on disk)."""
    state = json.loads(json.dumps(pipeline.life_state(), allow_nan=False))
    fresh = build_pipeline(PLUGINS)
    fresh.restore_life(state)
    return fresh


def test_a_daemon_restarted_between_two_reports_gives_the_figures_of_one_that_never_stopped():
    whole = build_pipeline(PLUGINS)
    feed(whole, range(60), 1)
    expected = feed(whole, range(60, 120), 61)
    split = build_pipeline(PLUGINS)
    feed(split, range(60), 1)
    got = feed(restarted(split), range(60, 120), 61)
    assert got["wall_s"] == pytest.approx(expected["wall_s"])
    assert got["ratio"] == pytest.approx(expected["ratio"], abs=1e-3)
    assert got["window_ratio"] == pytest.approx(expected["window_ratio"], abs=1e-3)
    assert got["badput_s"] == pytest.approx(expected["badput_s"], abs=0.01)
    assert got["job"]["attempts"] == expected["job"]["attempts"]
    assert got["job"]["ettr"] == pytest.approx(expected["job"]["ettr"], abs=1e-3)
    assert got["job"]["checkpoint"] == expected["job"]["checkpoint"]


def test_the_steps_done_while_the_daemon_was_down_count_once_and_the_ledger_still_adds_up():
    pipeline = build_pipeline(PLUGINS)
    feed(pipeline, range(40), 1)
    before = pipeline.life_state()["goodput"]["ledger"]["productive_s"]
    # down from +40 s to +70 s while the job went on: its next report is step 71
    goodput = feed(restarted(pipeline), range(70, 100), 71)
    productive = goodput["ratio"] * goodput["wall_s"]
    seen = feed(build_pipeline(PLUGINS), range(100), 1)  # a daemon that saw every step
    seen_productive = seen["ratio"] * seen["wall_s"]
    assert before < productive <= 100 * goodput["ideal_step_time_ms"] / 1000.0  # none twice
    # none lost to the gap: the same, but for the saves at steps 50, 60 and 70 nobody saw (1 s of each claimable)
    assert seen_productive <= productive <= seen_productive + 3.0 + 1e-3
    assert sum(goodput["badput_s"].values()) == pytest.approx(goodput["wall_s"] - productive, abs=0.01)
    assert len(goodput["job"]["attempts"]) == 1 and goodput["job"]["interruptions"] == 0


def test_a_restart_the_daemon_missed_is_still_an_attempt_with_its_re_done_steps_lost():
    pipeline = build_pipeline(PLUGINS)
    feed(pipeline, range(80), 1)  # saves at 10, 20, …, 80; the job dies after step 80, the daemon with it
    restored = restarted(pipeline)
    restart = LogEvent(T0 + 100, WORKERS_RESTARTED, "will restart worker group", details={"remaining": 1})
    restored.update(replace(job(100.0, training={"global_step": 80}), events=(restart,)))
    goodput = feed(restored, range(119, 150), 51)
    first, second = goodput["job"]["attempts"]
    assert (first["last_step"], first["end_reason"], second["first_step"]) == (80, "failure", 51)
    assert goodput["job"]["lost_s"]["lost_progress"] == pytest.approx(30.0)
    assert goodput["badput_s"]["lost_progress"] == pytest.approx(30.0, abs=0.5)


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s.pop("life"),
        lambda s: s["life"]["attempts"]["attempts"][0].update(start="yesterday"),
        lambda s: s["life"]["attempts"]["attempts"][0].update(points=[[1]]),
        lambda s: s["life"].update(saves=[["x", 1, 2.0]]),
        lambda s: s["goodput"]["ledger"].update(productive_s=-5.0),
        lambda s: s["goodput"]["ledger"].update(booked={"restart": "long"}),
        lambda s: s["goodput"].update(ideal_ms=0),
        lambda s: s.update(last_step="80"),
        lambda s: s.update(before_gap=[1, 2]),
    ],
)
def test_a_damaged_state_is_refused_whole_and_the_pipeline_is_left_as_it_was(damage):
    pipeline = build_pipeline(PLUGINS)
    feed(pipeline, range(30), 1)
    state = json.loads(json.dumps(pipeline.life_state()))
    damage(state)
    fresh = build_pipeline(PLUGINS)
    untouched = fresh.life_state()
    with pytest.raises(ValueError, match=r"\w"):  # a message that names what is wrong
        fresh.restore_life(state)
    assert fresh.life_state() == untouched


def test_the_running_attempt_keeps_a_bounded_number_of_progress_points():
    pipeline = build_pipeline(PLUGINS)
    feed(pipeline, range(1500), 1)
    (attempt,) = pipeline.life_state()["life"]["attempts"]["attempts"]
    points = attempt["points"]
    assert 256 <= len(points) <= 512 and points[0][0] == 1 and points[-1][0] == 1500
