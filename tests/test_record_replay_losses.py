"""A recorded NaN loss replays as NaN, and losses reported between two ticks are recorded and judged on replay
as the live daemon judged them."""

from __future__ import annotations

import json
import math

from tests import parts
from tests.recording import recording_engine
from trainpulse_otel.collect.trace import read_trace
from trainpulse_otel.runtime.replay import replay
from trainpulse_otel.samples import TrainingSample

NAN = float("nan")


def _loss(step: int) -> float:
    """A declining loss with deterministic ~1 % noise."""
    return 2.0 + 3.0 / (1 + step / 50) + 0.02 * math.sin(step * 1.7)


def _report(step: int, loss: float) -> TrainingSample:
    return TrainingSample(global_step=step, step_time_ms=300.0, loss=loss, model_name="m")


def _record(tmp_path, ticks: int = 90):
    """Three reports per tick; at tick 60 the first is a 2x spike, at tick 75 the middle one is NaN."""
    path = tmp_path / "trace.jsonl"
    clock = [1_764_400_000.0]
    engine = recording_engine(path, clock, history_size=1000)
    timeline, frames = [], []  # each tick's whole frame (the window keeps older ones as their history record)
    for i in range(ticks):
        for j in range(3):
            step = 3 * i + j
            loss = 2.0 * _loss(step) if (i, j) == (60, 0) else NAN if (i, j) == (75, 1) else _loss(step)
            engine.ingest(_report(step, loss))
            clock[0] += 0.25
        timeline += engine.tick().transitions
        frames.append(engine.window.latest)
        clock[0] += 0.25
    engine.close()
    return path, frames, timeline


def test_losses_between_ticks_are_recorded_and_a_nan_replays_as_nan(tmp_path):
    path, live, live_timeline = _record(tmp_path)
    raised = {(t.signal, t.event) for t in live_timeline}
    assert ("loss_spike", "raised") in raised and ("nonfinite_loss", "raised") in raised
    # the spike and the NaN were neither tick's newest report: only the loss stream carried them
    assert not any(f.training.loss is not None and math.isnan(f.training.loss) for f in live)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    nan_lines = [x for x in lines if "training" in x and math.isnan(x["training"].get("loss", 0.0))]
    assert len(nan_lines) == 1 and nan_lines[0]["training"]["global_step"] == 226
    assert '"loss":NaN' in path.read_text()  # Python's json token, read back as a float

    stepper = parts.stepper(history_size=1000)
    replayed = []
    with open(path, "rb") as fh:
        errors: list = []
        result = replay(read_trace(fh, errors), stepper, on_result=lambda _: replayed.append(stepper.window.latest))
    assert errors == [] and result.ticks == len(live) == 90
    assert [t.to_dict() for t in result.timeline] == [t.to_dict() for t in live_timeline]
    for a, b in zip(live, replayed, strict=True):
        assert [(p.ts, p.global_step) for p in a.losses] == [(p.ts, p.global_step) for p in b.losses]
    [nan_point] = [p for f in replayed for p in f.losses if p.loss is not None and math.isnan(p.loss)]
    assert nan_point.global_step == 226
