"""A recorded trace keeps the ranks' stacks: replay's frames carry the same ``Frame.stacks`` as the live ones."""

from __future__ import annotations

from tests import parts
from tests.recording import recording_engine, training_report
from trainpulse_otel.collect.trace import read_trace
from trainpulse_otel.runtime.replay import replay
from trainpulse_otel.samples import RankSample, StackFrame, TrainingSample

STACK = (StackFrame("/job/train.py", 120, "<module>"), StackFrame("/job/train.py", 71, "main"))


def _beat(rank: int, phase: str, stack=None) -> TrainingSample:
    return TrainingSample(ranks=(RankSample(rank=rank, global_step=7, phase=phase, phase_since=1.0, stack=stack),))


def test_replay_reproduces_the_stacks_of_the_live_frames(tmp_path):
    path = tmp_path / "trace.jsonl"
    clock = [1_764_400_000.0]
    engine = recording_engine(path, clock, history_size=1000)
    live = []
    for i in range(12):
        if i == 0:
            engine.ingest(training_report(i))
        if 2 <= i < 8:  # rank 2 stuck in data, its stack on every heartbeat; rank 1 waiting, no stack yet
            engine.ingest(_beat(2, "data", STACK))
            engine.ingest(_beat(1, "all_reduce"))
        if i == 8:
            engine.ingest(_beat(2, "compute"))  # moved on
        engine.tick()
        live.append(engine.window.latest)
        clock[0] += 1.0
    engine.close()
    assert [len(f.stacks) for f in live] == [0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert live[4].stacks[0].frames == STACK and live[4].stacks[0].rank == 2
    stepper = parts.stepper(history_size=1000)
    replayed = []
    with open(path, "rb") as fh:
        replay(read_trace(fh, []), stepper, on_result=lambda _: replayed.append(stepper.window.latest))
    assert [f.stacks for f in replayed] == [f.stacks for f in live]
    assert replayed == live  # and every other part of each frame
