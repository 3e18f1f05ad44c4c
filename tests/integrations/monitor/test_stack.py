"""Stacks taken in-process: when a rank's heartbeat carries one, what it holds, and its median step."""

from __future__ import annotations

import sys
import threading
import time

from tests.integrations.monitor.fakes import FakeStore, wait_for
from trainpulse_otel import TrainingMonitor
from trainpulse_otel.integrations.monitor import stack
from trainpulse_otel.integrations.monitor.distributed import World
from trainpulse_otel.integrations.monitor.heartbeat import RankState, StoreChannel
from trainpulse_otel.integrations.monitor.recorder import StepRecorder
from trainpulse_otel.integrations.monitor.stack import StepPace, frames_of, stack_after_s, thread_stack
from trainpulse_otel.samples import MAX_STACK_FRAMES, MAX_STRING_LENGTH, RankSample, StackFrame, parse_rank, to_dict


def test_a_stack_is_due_after_a_few_median_steps_and_never_before_the_floor():
    assert stack_after_s(None) == stack.STACK_AFTER_MIN_S
    assert stack_after_s(0.1) == stack.STACK_AFTER_MIN_S
    assert stack_after_s(4.0) == stack.STACK_AFTER_STEPS * 4.0


def test_the_pace_is_the_median_step_and_a_blocked_rank_leaves_it_as_it_was():
    pace = StepPace()
    assert pace.median_s is None
    for i, (steps, t) in enumerate([(0, 0.0), (10, 1.0), (20, 2.0), (25, 3.0), (35, 4.0)]):
        pace.note(steps, t)
        if i == 0:
            assert pace.median_s is None
    assert pace.median_s == 0.1  # 0.1, 0.1, 0.2, 0.1 s a step
    for t in (10.0, 60.0, 600.0):  # no step completes: nothing learnt
        pace.note(35, t)
    assert pace.median_s == 0.1


def _deep(n: int, until: threading.Event, ready: threading.Event) -> None:
    if n:
        _deep(n - 1, until, ready)
        return
    ready.set()
    until.wait(10)


def test_a_thread_stack_is_innermost_last_and_bounded():
    until, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=_deep, args=(100, until, ready), daemon=True)
    thread.start()
    try:
        assert ready.wait(5)
        frames = thread_stack(thread.ident)
    finally:
        until.set()
        thread.join(5)
    assert len(frames) == MAX_STACK_FRAMES  # the innermost 64 of over 100
    assert frames[-1].function == "wait" and frames[-1].file == threading.__file__  # as the interpreter names it
    mine = [f for f in frames if f.file == __file__]
    assert {f.function for f in mine} == {"_deep"} and frames.index(mine[-1]) >= len(frames) - 3
    assert thread_stack(-1) is None  # no such thread


def test_frames_of_the_caller_and_long_names_cut_to_their_end():
    frames = frames_of(sys._getframe(), 2)
    assert [f.function for f in frames][-1] == "test_frames_of_the_caller_and_long_names_cut_to_their_end"
    long = "/x" * 300 + "/train.py"
    cut = stack._bounded(long)
    assert len(cut) == MAX_STRING_LENGTH and cut.endswith("/train.py")


def test_a_heartbeat_carries_the_stack_once_the_rank_stays_put(monkeypatch):
    monkeypatch.setattr(stack, "STACK_AFTER_MIN_S", 0.3)
    recorder = StepRecorder()
    release, entered = threading.Event(), threading.Event()
    box: dict[str, RankState] = {}

    def train() -> None:
        box["state"] = RankState(recorder, World())  # made on the training thread, as TrainingMonitor() is
        with recorder.phase_timers["data"]:
            entered.set()
            release.wait(10)  # the line the stack must show

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    try:
        assert entered.wait(5)
        state = box["state"]
        assert state.beat().stack is None  # just entered
        assert wait_for(lambda: state.beat().stack is not None, 5)
        beat = state.beat()
    finally:
        release.set()
        thread.join(5)
    assert beat.phase == "data"
    innermost_here = [f for f in beat.stack if f.file == __file__][-1]
    assert innermost_here.function == "train" and innermost_here.line == train.__code__.co_firstlineno + 4
    assert parse_rank(to_dict(beat), "ranks[0]") == beat  # it travels as the payload says
    time.sleep(0.05)
    recorder.now = ("compute", time.perf_counter())  # moved on
    assert state.beat().stack is None


def _stuck_loader(release: threading.Event):
    yield 1
    release.wait(10)  # the data loader hangs: the line the daemon must see
    yield 2


def test_over_rest_the_daemon_keeps_the_stuck_ranks_stack_until_it_moves_on(served, monkeypatch):
    monkeypatch.setattr(stack, "STACK_AFTER_MIN_S", 0.3)
    release = threading.Event()
    box: dict[str, TrainingMonitor] = {}

    def train() -> None:
        box["monitor"] = monitor = TrainingMonitor(endpoint=served.url, interval=3600, hardware="none", heartbeat_s=0.1)
        for _ in monitor.wrap_dataloader(_stuck_loader(release)):
            with monitor.step():
                pass

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    engine = served.engine
    try:
        assert wait_for(lambda: engine.latest.stacks() != (), 10)
        (held,) = engine.latest.stacks()
        engine.tick()
        in_frame = engine.frame.stacks  # still stuck at the tick: the frame carries its stack
    finally:
        release.set()
        thread.join(5)
        box["monitor"].close()
    assert held.rank == 0 and held.phase == "data"
    innermost = [f for f in held.frames if f.file == __file__][-1]
    assert innermost.function == "_stuck_loader"
    assert [(s.rank, s.phase, s.frames[-1].function) for s in in_frame] == [(0, "data", held.frames[-1].function)]
    assert wait_for(lambda: engine.latest.stacks() == (), 5)  # the closing idle heartbeat: moved on


def test_through_the_store_a_rank_0_pipeline_gets_the_others_stacks():
    store = FakeStore()
    frames = (StackFrame("/job/train.py", 12, "main"),)
    StoreChannel(World(rank=1, world_size=2), store).put(RankSample(rank=1, phase="data", stack=frames))
    (beat,) = StoreChannel(World(rank=0, world_size=2), store).read()
    assert beat.stack == frames
