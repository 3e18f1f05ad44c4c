"""A rank's stack is kept beside its entry until it moves on, reaches every frame, and never the instruments."""

from __future__ import annotations

from trainpulse_otel.samples import RankSample, RankStack, StackFrame, TrainingSample, with_stacks
from trainpulse_otel.telemetry.latest import LatestSamples

STACK = (StackFrame("train.py", 40, "main"), StackFrame("train.py", 12, "load"))


def _beat(rank: int, phase: str, step: int = 7, stack=None) -> TrainingSample:
    return TrainingSample(ranks=(RankSample(rank=rank, global_step=step, phase=phase, stack=stack),))


def test_the_latest_stack_is_held_until_a_heartbeat_without_one():
    latest = LatestSamples()
    latest.put_training(_beat(1, "data", stack=STACK), now=1.0)
    latest.put_training(_beat(0, "all_reduce"), now=1.0)
    assert latest.stacks() == (RankStack(1, 7, "data", STACK),)
    assert all(r.stack is None for r in latest.current().training.ranks)  # no point carries a stack
    latest.put_training(TrainingSample(ranks=(RankSample(rank=1, step_time_ms=90.0),)), now=2.0)
    assert latest.stacks() == (RankStack(1, 7, "data", STACK),)  # a measurement is no heartbeat: still there
    latest.put_training(_beat(1, "compute", step=8), now=3.0)  # moved on
    assert latest.stacks() == ()


def test_stacks_expire_with_their_ranks():
    latest = LatestSamples(stale_after_s=10.0)
    latest.put_training(_beat(2, "data", stack=STACK), now=1.0)
    latest.expire(20.0)
    assert latest.stacks() == ()


def test_a_trace_keeps_the_stack_on_its_rank():
    training = TrainingSample(ranks=(RankSample(rank=0, phase="data"), RankSample(rank=1, phase="sync")))
    put_back = with_stacks(training, (RankStack(0, 7, "data", STACK),))
    assert put_back.ranks[0].stack == STACK and put_back.ranks[1].stack is None
    assert with_stacks(training, ()) is training
