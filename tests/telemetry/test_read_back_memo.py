"""A stream of frames read back with a memo is the stream read back without one."""

from __future__ import annotations

from dataclasses import replace

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.telemetry.read_back import ReadBackMemo, frame_from_samples

T0 = 1764400000.0


def test_frames_read_with_a_memo_equal_frames_read_without_one_as_samples_come_and_stay():
    nodes = [SimulatedNode("thermal_instability", seed=s, hostname=f"node-{s}", start_ts=T0) for s in range(2)]
    memo = ReadBackMemo()
    held = [n.sample(0.0) for n in nodes]
    for t in range(1, 12):
        if t % 3 == 0:  # node 0 pushes again (new samples); node 1's stay the same objects
            held[0] = nodes[0].sample(float(t))
        gpus = tuple(g.on_node(f"node-{i}") for i, c in enumerate(held) for g in c.gpus)
        ranks = tuple(
            replace(r, rank=8 * i + r.rank, hostname=f"node-{i}") for i, c in enumerate(held) for r in c.training.ranks
        )
        training = replace(held[0].training, ranks=ranks)
        plain = frame_from_samples(T0 + t, gpus, None, training)
        memoised = frame_from_samples(T0 + t, gpus, None, training, memo=memo)
        assert memoised == plain
        again = frame_from_samples(T0 + t, gpus, None, training, memo=memo)  # nothing changed: the same objects
        assert all(a is b for a, b in zip(again.training.ranks, memoised.training.ranks, strict=True))
        assert all(a is b for a, b in zip(again.gpus, memoised.gpus, strict=True))
