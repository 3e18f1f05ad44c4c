"""Rank heartbeats from the monitor: sent from a background thread while the training thread is blocked,
over REST and in-process, with the phase the recorder is in; kept apart from the step reports."""

from __future__ import annotations

import json
import threading
import time

from tests.integrations.monitor.fakes import FakeStore, Recorder, wait_for
from trainpulse_otel import TrainingMonitor
from trainpulse_otel.integrations.monitor import heartbeat
from trainpulse_otel.integrations.monitor.distributed import World
from trainpulse_otel.integrations.monitor.heartbeat import StoreChannel
from trainpulse_otel.samples import RankSample


def heartbeats(daemon: Recorder) -> list[dict]:
    return [r["json"]["ranks"][0] for r in daemon.requests if set(r["json"]) == {"ranks"}]


def blocked_in(monitor: TrainingMonitor, phase: str, release: threading.Event) -> threading.Thread:
    """A training thread that runs two steps, then blocks inside ``phase`` of the third until released."""

    def train() -> None:
        for _ in range(2):
            with monitor.step(tokens=8):
                pass
        with monitor.step(tokens=8), monitor.phase(phase):
            release.wait(20)

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    return thread


def test_rest_heartbeats_keep_coming_while_the_step_is_blocked_in_a_collective():
    release = threading.Event()
    with Recorder(lambda r: ("202 Accepted", b"{}")) as daemon:
        monitor = TrainingMonitor(endpoint=daemon.url, interval=3600, hardware="none", heartbeat_s=0.1)
        entered = time.time()
        thread = blocked_in(monitor, "all_reduce", release)
        try:
            assert wait_for(lambda: len([b for b in heartbeats(daemon) if b["phase"] == "all_reduce"]) >= 5)
        finally:
            release.set()
            thread.join(5)
            monitor.close()
    blocked = [b for b in heartbeats(daemon) if b["phase"] == "all_reduce"]
    assert {(b["rank"], b["global_step"]) for b in blocked} == {(0, 2)}  # two steps done, the third is stuck
    assert len({b["phase_since"] for b in blocked}) == 1  # the same since, to the millisecond it is sent in
    assert entered - 0.001 <= blocked[0]["phase_since"] <= time.time()
    assert blocked[0]["pid"] > 0 and blocked[0]["hostname"]
    assert heartbeats(daemon)[-1]["phase"] == "idle" and heartbeats(daemon)[-1]["global_step"] == 3
    assert monitor.stats["heartbeats_sent"] >= 6


def test_in_process_the_blocked_rank_is_in_the_frame_with_its_phase_and_no_new_step():
    release = threading.Event()
    monitor = TrainingMonitor(interval=0.1, hardware="none")
    thread = blocked_in(monitor, "sync", release)
    engine = monitor._destination.engine  # the in-process engine: what its pipeline saw
    try:

        def rank0() -> RankSample | None:
            training = engine.frame.training if engine.frame is not None else None
            return training.ranks[0] if training is not None and training.ranks else None

        assert wait_for(lambda: rank0() is not None and rank0().phase == "sync")
        steps = engine.frame.training.global_step
        time.sleep(0.5)  # ticks go on; heartbeats are not steps
        assert engine.frame.training.global_step == steps == 2 and rank0().global_step == 2
    finally:
        release.set()
        thread.join(5)
        monitor.close()


def test_data_loader_waits_and_phases_set_the_phase_and_restore_it():
    monitor = TrainingMonitor(endpoint="http://127.0.0.1:9", interval=3600, hardware="none", heartbeat_s=5)
    state = monitor._state
    try:
        seen = []
        for _ in monitor.wrap_dataloader(iter(range(2))):
            seen.append(state.beat().phase)
            with monitor.step():
                seen.append(state.beat().phase)
                with monitor.phase("optimizer"):
                    seen.append(state.beat().phase)
                seen.append(state.beat().phase)
        assert seen == ["compute", "compute", "optimizer", "compute"] * 2
        assert state.beat().phase == "data"  # the loader is being asked for the next batch
    finally:
        monitor.close()
    assert state.beat().phase == "idle"


def test_the_store_channel_forwards_fresh_heartbeats_counts_them_and_drops_stale_or_malformed_ones(monkeypatch):
    monkeypatch.setattr(heartbeat, "READ_EVERY_S", 0.0)
    store = FakeStore()
    reader = StoreChannel(World(rank=0, world_size=4), store)
    for r in (1, 2):
        StoreChannel(World(rank=r, world_size=4), store).put(RankSample(rank=r, global_step=7, phase="sync"))
    store.data["trainpulse/heartbeat/3"] = json.dumps({"sent_at": time.time() - 60, "rank": {"rank": 3}}).encode()
    assert [(b.rank, b.phase) for b in reader.read()] == [(1, "sync"), (2, "sync")]
    assert reader.read() and reader.received == {1: 1, 2: 1}  # the same entries again: nothing new received
    store.data["trainpulse/heartbeat/2"] = b"{not json"
    assert [b.rank for b in reader.read()] == [1]


def test_rank_0_asks_the_store_at_most_every_half_second_whatever_its_tick_rate():
    store = FakeStore()
    reader = StoreChannel(World(rank=0, world_size=2), store)
    StoreChannel(World(rank=1, world_size=2), store).put(RankSample(rank=1, global_step=7, phase="sync"))
    assert [b.phase for b in reader.read()] == ["sync"]
    StoreChannel(World(rank=1, world_size=2), store).put(RankSample(rank=1, global_step=8, phase="compute"))
    assert [b.phase for b in reader.read()] == ["sync"]  # within READ_EVERY_S: the last answer
    time.sleep(heartbeat.READ_EVERY_S)
    assert [b.phase for b in reader.read()] == ["compute"]


def test_a_rank_other_than_0_posts_only_its_heartbeats_over_rest(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with Recorder(lambda r: ("202 Accepted", b"{}")) as daemon:
        monitor = TrainingMonitor(endpoint=daemon.url, interval=0.05, hardware="none", heartbeat_s=0.05)
        for _ in range(3):
            with monitor.step(tokens=8):
                time.sleep(0.01)
        assert wait_for(lambda: len(heartbeats(daemon)) >= 3)
        monitor.close()
    assert all(set(r["json"]) == {"ranks"} for r in daemon.requests)  # its step numbers reach rank 0 by the gather
    last = heartbeats(daemon)[-1]
    assert (last["rank"], last["gpu_index"], last["global_step"], last["phase"]) == (1, 1, 3, "idle")
