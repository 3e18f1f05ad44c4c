"""Reports arrive faster than ticks: a one-step loss spike posted between two ticks, followed by a normal
report, is still judged (over real HTTP to a waitress-served daemon)."""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.e2e

JSON = {"Content-Type": "application/json"}


def _loss(step: int) -> float:
    return 2.3 - step / 2000 + 0.02 * math.sin(step * 2.1)  # slow decline, ~1 % deterministic noise


def _post(served, step: int, loss: float) -> None:
    body = {"global_step": step, "step_time_ms": 250.0, "tokens_per_sec": 5e5, "loss": loss}
    status, _, raw = served.send("POST", "/v1/training", json.dumps(body).encode(), JSON)
    assert status == 202, raw


def test_a_spike_between_two_ticks_is_raised_though_the_newest_report_is_normal(served):
    step = 0
    for _ in range(40):  # one report per tick: the baseline
        _post(served, step, _loss(step))
        served.engine.tick()
        step += 1
    for loss in (_loss(step), 1.8 * _loss(step + 1), _loss(step + 2)):  # three reports, then one tick
        _post(served, step, loss)
        step += 1
    served.engine.tick()
    status, snapshot = served.get_json("/v1/snapshot")
    assert status == 200 and snapshot["training"]["loss"] == pytest.approx(_loss(42))  # the frame: the newest
    [spike] = [s for s in snapshot["diagnosis"]["signals"] if s["name"] == "loss_spike"]
    assert spike["evidence"]["step"] == 41 and 1.7 < spike["evidence"]["spike_ratio"] < 1.9
    assert snapshot["diagnosis"]["root_causes"][0]["cause"] == "numerical_instability"
