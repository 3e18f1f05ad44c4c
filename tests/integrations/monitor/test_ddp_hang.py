"""A real 3-process gloo job with torch's DistributedDataParallel, instrumented only with
``TrainingMonitor(model=ddp)`` and ``monitor.step()`` — no ``phase()``, no ``sync_point`` — in which rank 2
sleeps before its backward pass for 25 s (``ddp_worker.py``, the line marked ``HANG``).

The monitor's DDP communication hook marks the other ranks as waiting in ``all_reduce`` (inside their
``loss.backward()``), so rank 0's in-process diagnosis raises ``training_stalled`` naming rank 2 within
45 s of the block; rank 2's heartbeats carry its stack, so ``rank_hang`` names the file and line it
blocks at and starts its remediation there; the signal clears when rank 2 resumes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.monitor.gloo_job import run_job
from tests.integrations.monitor.hangs import MAX_DETECTION_S, events

#: A real multi-process job whose timing is what is judged: run alone, after the parallel pass (scripts/test).
pytestmark = pytest.mark.serial

pytest.importorskip("torch")

WORKER = Path(__file__).with_name("ddp_worker.py")
WORLD, HANG_RANK, HANG_AFTER_S, HANG_S = 3, 2, 6.0, 25.0


def hang_line() -> int:
    """The line of the worker where the hanging rank sleeps."""
    lines = WORKER.read_text(encoding="utf-8").splitlines()
    (number,) = [i for i, line in enumerate(lines, 1) if "# HANG:" in line]
    return number


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_job(
        tmp_path_factory.mktemp("ddp_hang"),
        WORLD,
        timeout_s=150,
        worker=WORKER,
        seconds=HANG_AFTER_S + HANG_S + 4,
        hang_rank=HANG_RANK,
        hang_after=HANG_AFTER_S,
        hang_s=HANG_S,
        heartbeat_s=1.0,
    )


def test_the_stall_names_the_blocked_rank_and_the_others_wait_in_ddps_all_reduce(result):
    assert result["all_reduce_hooked"]
    block = result["hang_from_s"]
    assert block is not None
    (stalled, *_) = events(result, "raised", "training_stalled")
    assert block < stalled["t"] <= block + MAX_DETECTION_S, (block, stalled)
    evidence = stalled["evidence"]
    assert [e["rank"] for e in evidence["lagging"]] == [HANG_RANK] and evidence["lagging"][0]["phase"] == "compute"
    assert (evidence["waiting_phase"], evidence["waiting_ranks"]) == ("all_reduce", WORLD - 1)  # the hook's mark
    assert f"rank {HANG_RANK}" in stalled["message"]


def test_the_cause_names_the_file_and_line_where_the_rank_blocks(result):
    block = result["hang_from_s"]
    where = f"{WORKER}:{hang_line()} in main"
    named = [c for c in result["hang_causes"] if where in c["summary"]]
    assert named, [c["summary"] for c in result["hang_causes"]]
    first = named[0]
    assert first["t"] <= block + MAX_DETECTION_S
    assert f"Rank {HANG_RANK} stands at {where}" in first["summary"]
    assert first["remediation"].startswith(f"Start at {where}")
    assert first["subject"]["rank"] == HANG_RANK
    groups = {tuple(g["ranks"]): g for g in first["evidence"]["stacks"]}
    assert set(groups) == {(HANG_RANK,), tuple(r for r in range(WORLD) if r != HANG_RANK)}
    assert groups[(HANG_RANK,)]["phase"] == "compute"
    assert groups[(HANG_RANK,)]["frames"][-1] == {"file": str(WORKER), "line": hang_line(), "function": "main"}


def test_nothing_before_the_block_and_the_signal_clears_when_the_rank_resumes(result):
    block = result["hang_from_s"]
    (stalled, *_) = events(result, "raised", "training_stalled")
    early = [(e["t"], e["signal"]) for e in result["timeline"] if e["event"] == "raised" and e["t"] < block]
    assert not early, early
    cleared = [e for e in events(result, "cleared", "training_stalled") if e["t"] > stalled["t"]]
    assert cleared and cleared[0]["t"] <= block + HANG_S + 10, cleared
    assert result["steps"] > result["hang_from_step"] + 10  # training went on
