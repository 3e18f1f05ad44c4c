"""A job's attempts from what it reports: the step going back, the launcher's restart, a new process; what each
restart cost, in lost progress, checkpoint load and restart; MTBF and the life's ETTR."""

from __future__ import annotations

import pytest

from trainpulse_otel.diagnose.joblife.attempts import ENDED, FAILED, MAX_POINTS, AttemptLedger

T0 = 1_000.0


def run(ledger: AttemptLedger, first: int, last: int, start: float, step_s: float = 1.0, pid: int | None = None):
    """Steps ``first``..``last``, one every ``step_s`` from ``start``; the time after the last."""
    ts = start
    for step in range(first, last + 1):
        ledger.progress(ts, step, pid)
        ts += step_s
    return ts


def test_a_rank_killed_between_checkpoints_is_two_attempts_with_the_re_done_steps_lost():
    """Steps 1-80, one a second; killed after 80 (its last progress at +79 s); torchrun says it restarts;
    the new processes load the step-50 checkpoint in 5 s and step 51 comes 40 s after the last progress."""
    ledger = AttemptLedger()
    run(ledger, 1, 80, T0, pid=100)
    ledger.restarted(T0 + 85)
    ledger.checkpoint_loaded(0.0, 5.0)
    end = run(ledger, 51, 120, T0 + 79 + 40, pid=200)
    ledger.finish(end - 1)
    first, second = ledger.attempts
    assert (first.first_step, first.last_step, first.end_reason) == (1, 80, FAILED)
    assert (second.first_step, second.last_step, second.end_reason) == (51, 120, ENDED)
    assert second.resumed_from_step == 50
    assert second.lost_progress_s == pytest.approx(30.0)  # steps 51-80 of the first attempt: 79 s - 49 s
    assert second.checkpoint_load_s == pytest.approx(5.0) and second.restart_s == pytest.approx(35.0)
    assert ledger.interruptions == 1 and ledger.lost() == {
        "lost_progress": pytest.approx(30.0),
        "restart": pytest.approx(35.0),
        "checkpoint_load": pytest.approx(5.0),
    }
    assert ledger.mtbf_s() == pytest.approx(79.0 + 69.0)  # the attempts' running time per interruption
    wall = end - 1 - T0
    productive = 80 + 70 - 30  # every step's second, the re-done ones once (the goodput books them as lost)
    assert ledger.ettr(productive, wall) == pytest.approx(productive / wall)
    assert ledger.ettr(productive, 0.0) is None and AttemptLedger().ettr(productive, wall) is None
    assert [a["end_reason"] for a in ledger.to_dict()["attempts"]] == [FAILED, ENDED]


def test_the_step_going_back_alone_is_a_new_attempt_and_a_steady_job_is_one():
    ledger = AttemptLedger()
    run(ledger, 1, 40, T0)
    run(ledger, 21, 60, T0 + 100)  # no restart line, no pid: the step went back to a checkpoint's
    assert len(ledger.attempts) == 2 and ledger.attempts[1].lost_progress_s == pytest.approx(20.0)
    steady = AttemptLedger()
    run(steady, 1, 500, T0, pid=7)
    assert len(steady.attempts) == 1 and steady.interruptions == 0 and steady.mtbf_s() is None
    assert steady.lost() == {"lost_progress": 0.0, "restart": 0.0, "checkpoint_load": 0.0}


def test_a_new_process_resuming_from_the_last_step_is_a_new_attempt_with_nothing_lost_but_the_gap():
    ledger = AttemptLedger()
    run(ledger, 1, 30, T0, pid=1)
    run(ledger, 31, 40, T0 + 29 + 60, pid=2)  # saved at 30 on its way down: nothing done again
    second = ledger.attempts[1]
    assert second.lost_progress_s == 0.0 and second.restart_s == pytest.approx(60.0)


def test_a_long_attempt_keeps_bounded_points_and_still_finds_when_it_passed_a_step():
    ledger = AttemptLedger()
    run(ledger, 1, 3 * MAX_POINTS, T0)
    (attempt,) = ledger.attempts
    assert len(attempt.points) <= MAX_POINTS + 1
    spacing = max(b[0] - a[0] for a, b in zip(attempt.points, attempt.points[1:], strict=False))
    passed = attempt.passed(MAX_POINTS)
    assert passed is not None and 0 <= (T0 + MAX_POINTS - 1) - passed < spacing  # within the kept resolution
    assert attempt.passed(3 * MAX_POINTS - 3) == pytest.approx(T0 + 3 * MAX_POINTS - 4, abs=spacing)
    assert attempt.passed(0) is None


def test_a_heartbeat_of_the_ended_process_that_lingers_begins_no_further_attempt():
    ledger = AttemptLedger()
    for step in range(1, 41):
        ledger.progress(float(step), step, pid=100)
    ledger.restarted(45.0)
    for i, pid in enumerate((100, 100, 100, 200, 100, 200)):  # the old heartbeat lingers for a few reports
        ledger.progress(60.0 + i, 31 + i, pid=pid)
    first, second = ledger.attempts
    assert (first.pid, second.pid, second.first_step, second.last_step) == (100, 200, 31, 36)
