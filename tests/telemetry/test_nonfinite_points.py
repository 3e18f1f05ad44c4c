"""A NaN or infinite loss through the OTel conversion: the SDK drops non-finite measurements, so the value
travels as a ``training.nonfinite`` point and comes back into the frame as the same NaN/inf."""

from __future__ import annotations

import math

from trainpulse_otel.samples import RankSample, TrainingSample
from trainpulse_otel.telemetry.assembly import FrameAssembler
from trainpulse_otel.telemetry.conversion import observe
from trainpulse_otel.telemetry.read_back import frame_from_samples

NAN, INF = float("nan"), float("inf")


def test_a_nan_loss_is_a_nonfinite_point_not_a_loss_point_and_reads_back_as_nan():
    training = TrainingSample(
        model_name="m",
        step_time_ms=800.0,
        loss=NAN,
        grad_norm=-INF,
        ranks=(RankSample(rank=0, step_time_ms=790.0, loss=INF), RankSample(rank=1, loss=2.5)),
    )
    points = observe(training=training)
    assert points["training.loss"] == [] and points["training.grad_norm"] == []
    assert [p[1]["field"] for p in points["training.nonfinite"] if "rank" not in p[1]] == ["loss", "grad_norm"]
    tokens = {(p[1].get("rank"), p[1]["field"]): p[1]["value"] for p in points["training.nonfinite"]}
    assert tokens == {(None, "loss"): "nan", (None, "grad_norm"): "-inf", (0, "loss"): "inf"}
    assert [v for v, _ in points["rank.loss"]] == [2.5]
    assembler = FrameAssembler()
    assembler.add_observations(points)
    live = assembler.frame(1.0).training
    replayed = frame_from_samples(1.0, training=training).training
    for frame in (live, replayed):
        assert math.isnan(frame.loss) and frame.grad_norm == -INF and frame.step_time_ms == 800.0
        assert frame.ranks[0].loss == INF and frame.ranks[1].loss == 2.5
