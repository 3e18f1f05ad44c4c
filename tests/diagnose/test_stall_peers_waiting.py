"""``training_stalled`` after max(15 s, 5 steps) where the heartbeats plainly show the peers waiting in a
collective — and only there: a long first step, an evaluation, a save, a merely slow rank keep the 30 s rule."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests import parts
from tests.diagnose.builders import T0, Harness, job
from trainpulse_otel.cli import main
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose.detectors.stall import TrainingStalled
from trainpulse_otel.samples import Frame, GpuSample, HostSample, RankSample, TrainingSample

# ------------------------------------------------------------------ a recorded hang, replayed

RANKS, STEP_S, BLOCK_STEP, STUCK, END_S = 8, 0.5, 200, 5, 140
BLOCK_S = BLOCK_STEP * STEP_S  # rank 5 enters its data loader after step 200 and never leaves it


class EightGpus:
    """The job's GPUs: busy while it steps; during the hang the peers spin at low power, the stuck one idles."""

    name = "scripted"

    def __init__(self) -> None:
        self.blocked = False

    def collect(self, now: float) -> Collected:
        def one(i: int) -> GpuSample:
            util, watts = (
                (0.0, 90.0) if self.blocked and i == STUCK else (100.0, 130.0) if self.blocked else (97.0, 610.0)
            )
            return GpuSample(index=i, utilization_percent=util, power_watts=watts, power_limit_watts=700.0)

        return Collected(gpus=tuple(one(i) for i in range(RANKS)), host=HostSample(cpu_percent=20.0))

    def close(self) -> None:
        pass


def beat(rank: int, step: int, phase: str, since: float, heartbeats: bool) -> RankSample:
    if not heartbeats:
        return RankSample(rank=rank, gpu_index=rank, hostname="node-000", step_time_ms=STEP_S * 1000.0)
    return RankSample(
        rank=rank,
        gpu_index=rank,
        hostname="node-000",
        global_step=step,
        phase=phase,
        phase_since=since,
        pid=4000 + rank,
    )


def record_hang(path, heartbeats: bool) -> None:
    """A daemon recording the job: a report per tick (two 0.5 s steps each) up to step 200; then rank 5 sits in
    ``data`` while the other seven wait in ``all_reduce``, their heartbeats arriving every 2 s."""
    clock, gpus = [T0], EightGpus()
    engine = parts.engine(Settings(record=str(path)), collectors=[gpus], mode="scripted", clock=lambda: clock[0])
    for t in range(END_S):
        now = T0 + t
        if t <= BLOCK_S:
            step = int(t / STEP_S)
            ranks = tuple(beat(r, step, "data", now, heartbeats) for r in range(RANKS))
            engine.ingest(TrainingSample(timestamp=now, global_step=step, step_time_ms=500.0, ranks=ranks))
        else:
            gpus.blocked = True
            if heartbeats and t % 2 == 0:
                since = {r: T0 + BLOCK_S + (0.0 if r == STUCK else 0.4) for r in range(RANKS)}
                phases = {r: "data" if r == STUCK else "all_reduce" for r in range(RANKS)}
                engine.ingest(
                    TrainingSample(ranks=tuple(beat(r, BLOCK_STEP, phases[r], since[r], True) for r in since))
                )
        engine.tick()
        clock[0] += 1.0
    engine.close()


def replayed(tmp_path, capsys, heartbeats: bool) -> tuple[float, dict]:
    """``trainpulse replay`` of the recorded hang: when training_stalled was raised (s after the block), and it."""
    path = tmp_path / "hang.jsonl"
    record_hang(path, heartbeats)
    assert main(["replay", str(path), "-json"]) == 0
    out = json.loads(capsys.readouterr().out)
    raised, *_ = [t for t in out["timeline"] if t["signal"] == "training_stalled" and t["event"] == "raised"]
    (signal,) = [s for s in out["diagnosis"]["signals"] if s["name"] == "training_stalled"]
    return raised["ts"] - T0 - BLOCK_S, signal


def test_a_replayed_hang_with_the_peers_seen_in_all_reduce_is_raised_within_15_s_naming_the_rank(tmp_path, capsys):
    after, signal = replayed(tmp_path, capsys, heartbeats=True)
    assert 14 <= after <= 15, after  # max(15 s, 5 x 0.5 s) from the last step: plain evidence raises it at once
    evidence = signal["evidence"]
    assert evidence["threshold_s"] == 15.0 and evidence["peers_waiting"] is True
    assert [(e["rank"], e["phase"]) for e in evidence["lagging"]] == [(STUCK, "data")]
    assert (evidence["waiting_phase"], evidence["waiting_ranks"]) == ("all_reduce", 7)
    assert "rank 5 (GPU 5) is in data" in signal["message"] and "threshold 15 s" in signal["message"]


def test_the_same_hang_without_heartbeats_keeps_the_30_s_floor(tmp_path, capsys):
    after, signal = replayed(tmp_path, capsys, heartbeats=False)
    assert 29 <= after <= 32, after
    evidence = signal["evidence"]
    assert evidence["threshold_s"] == 30.0 and "peers_waiting" not in evidence
    assert evidence["inferred_from"] == "gpus" and [e["gpu_index"] for e in evidence["lagging"]] == [STUCK]


# ------------------------------------------------------------------ what is no plain evidence

#: (rank, seconds into the wait) -> the rank's heartbeat (phase, phase_since in s from the wait's start, global_step)
Beat = Callable[[int, float], tuple[str, float | None, int]]
LAST_STEP = 24059  # the job's last completed step in :func:`waiting_run`


def waiting_run(beats: Beat, reports: int = 60, wait_s: int = 25, **changes: object) -> Harness:
    """``reports`` healthy reports (a 1.7 s median step), then ``wait_s`` s of heartbeats only, then steps again."""
    frames = [job(float(t), training={"global_step": 24000 + t - reports + 60, **changes}) for t in range(reports)]
    ranks = frames[-1].training.ranks
    for t in range(reports, reports + wait_s):
        phased = []
        for r in ranks:
            phase, since, step = beats(r.rank, t - reports)
            at = None if since is None else T0 + reports + since
            phased.append(RankSample(rank=r.rank, gpu_index=r.gpu_index, global_step=step, phase=phase, phase_since=at))
        frames.append(Frame(ts=T0 + t, gpus=frames[0].gpus, training=TrainingSample(ranks=tuple(phased))))
    resume = reports + wait_s
    frames += [job(float(t), training={"global_step": LAST_STEP + 1 + t - resume}) for t in range(resume, resume + 10)]
    return Harness(TrainingStalled()).feed(frames)


def odd_rank(phase: str, rank: int = 5, collective: str = "all_reduce") -> Beat:
    """Rank ``rank`` in ``phase`` since the wait began, the others in ``collective`` since 0.4 s later."""
    return lambda r, _: (phase, 0.0, LAST_STEP) if r == rank else (collective, 0.4, LAST_STEP)


def test_the_plain_case_is_raised_within_about_15_s():
    harness = waiting_run(odd_rank("data"))
    assert 60 + 14 <= harness.first_raise_s("training_stalled") <= 60 + 17
    evidence = [f for _, found in harness.findings for f in found][-1].evidence  # the last while it waited
    assert evidence["threshold_s"] == 15.0 and [e["rank"] for e in evidence["lagging"]] == [5]


def slow_through_micro_batches(r: int, s: float) -> tuple[str, float | None, int]:
    """Rank 5 works through its micro-batches (gradient accumulation): its phase moves every second."""
    return (("data", "compute")[int(s) % 2], s, LAST_STEP) if r == 5 else ("all_reduce", 0.4, LAST_STEP)


def slow_catching_up(r: int, s: float) -> tuple[str, float | None, int]:
    """Rank 5, behind, completes a step every 2 s (each restarting its phase) until it reaches the others."""
    return ("compute", s - s % 2, LAST_STEP - 12 + int(s // 2)) if r == 5 else ("all_reduce", 0.4, LAST_STEP)


def three_elsewhere(r: int, _: float) -> tuple[str, float | None, int]:
    return ("data", 0.0, LAST_STEP) if r in (1, 5, 6) else ("all_reduce", 0.4, LAST_STEP)


def no_phase_since(r: int, _: float) -> tuple[str, float | None, int]:
    return ("data", None, LAST_STEP) if r == 5 else ("all_reduce", 0.4, LAST_STEP)


@pytest.mark.parametrize(
    ("case", "beats"),
    [
        ("rank 0 evaluates while the others wait at a barrier", odd_rank("eval", 0, "sync")),
        ("rank 0 saves while the others wait", odd_rank("checkpoint", 0, "sync")),
        ("a slow rank whose phase moves", slow_through_micro_batches),
        ("a slow rank whose step advances", slow_catching_up),
        ("three of eight ranks elsewhere", three_elsewhere),
        ("a rank that does not say since when", no_phase_since),
    ],
)
def test_no_early_raise_where_the_evidence_is_not_plain(case, beats):
    assert waiting_run(beats).raised() == [], case


@pytest.mark.parametrize(
    ("reports", "changes"),
    [(2, {}), (20, {"step_time_ms": None})],
    ids=["two steps in", "steps without a step time"],
)
def test_a_long_step_before_the_median_rests_on_ten_reports_keeps_the_floor(reports, changes):
    """Early in the job (a median of two steps is none) or from a job that reports no step times: rank 3 still
    compiling for 25 s while the others wait is judged by the 30 s rule."""
    assert waiting_run(odd_rank("compute", 3), reports=reports, **changes).raised() == []
    assert 20 + 14 <= waiting_run(odd_rank("compute", 3), reports=20).first_raise_s("training_stalled") <= 20 + 17
