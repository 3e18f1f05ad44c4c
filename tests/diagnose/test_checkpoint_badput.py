"""A job whose checkpoints block the loop: the badput is the saves' time, charged once, to the saves.

Four ranks of ~1 s steps; every 2 minutes rank 0 saves for ~25 s while the others wait in the next
all-reduce, so every rank's step that ends the save includes it, and the job reports the save's length
(``checkpoint_ms``). The reports are sampled every ~5 s and carry the latest step, as a scraped exporter's
do: a report stands for the ~5 steps since the last one, and its step time is the last step's — the save
included, once. Before the wall-time ledger the budget spread the save over the report's steps and took
the rest of that step's time as each step's own loss: ~4/5 of every save counted again (275 s of compute
or unattributed badput against 74 s of saves).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from trainpulse_otel.collect.trace import TraceRecord
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime import open_replay
from trainpulse_otel.runtime.replay import replay
from trainpulse_otel.samples import RankSample, TrainingSample

T0 = 1_764_400_000.0


def checkpointing_job(seconds: float = 420.0, ranks: int = 4, every_s: float = 120.0, seed: int = 0) -> Iterator:
    """The job's trace records: a report every ~5 s of its latest step."""
    rng = random.Random(seed)
    t = last_save = last_report = T0
    step = 1000
    while t - T0 < seconds:
        compute = 1.0 + rng.gauss(0.0, 0.02)
        save = 0.0
        if t - last_save >= every_s:
            save, last_save = rng.uniform(23.75, 26.25), t
        t += compute + save
        step += 1
        if t - last_report < 5.0:
            continue
        last_report = t
        step_ms, save_ms = 1000.0 * (compute + save), 1000.0 * save
        per_rank = tuple(
            RankSample(
                rank=r,
                gpu_index=r,
                step_time_ms=step_ms,  # the save is in every rank's step: rank 0 saved, the others waited for it
                data_wait_ms=5.0,
                sync_wait_ms=3.0,
                all_reduce_wait_ms=50.0 + rng.random() + (save_ms if r else 0.0),
            )
            for r in range(ranks)
        )
        report = TrainingSample(
            timestamp=t,
            global_step=step,
            step_time_ms=step_ms,
            checkpoint_ms=save_ms,
            data_wait_ms=5.0,
            sync_wait_ms=3.0,
            all_reduce_wait_ms=50.0,
            tokens_per_sec=10_000.0 / (compute + save),
            world_size=ranks,
            ranks=per_rank,
        )
        yield TraceRecord(0, t, "training", report)


def test_the_saves_are_the_largest_badput_their_own_time_and_never_a_compute_loss():
    records = list(checkpointing_job())
    saves_s = sum(r.payload.checkpoint_ms for r in records) / 1000.0
    assert saves_s == pytest.approx(75.0, rel=0.1)  # three saves of ~25 s
    diagnosis = replay(iter(records), open_replay(Settings(interval=1.0)), interval_s=1.0).diagnosis
    goodput = diagnosis.goodput
    badput = goodput.badput_s
    assert max(badput, key=badput.get) == "checkpoint_io_bound"
    assert badput["checkpoint_io_bound"] == pytest.approx(saves_s, rel=0.10)
    assert badput.get("compute_inefficiency", 0.0) < 0.5  # ≈ 0: no step's save is its own compute loss
    assert badput.get("unattributed", 0.0) < 0.1 * saves_s  # nor time nobody can explain
    assert goodput.ranks == ()  # nor any rank's own lateness
    wall = records[-1].ts - records[0].ts
    assert sum(badput.values()) == pytest.approx((1.0 - goodput.ratio) * wall, abs=0.01 * wall)
    assert diagnosis.root_causes[0].cause == "checkpoint_io_bound"
