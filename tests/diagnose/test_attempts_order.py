"""A report stamped before the latest step's time (another node's, arriving late) is neither progress nor a restart;
the same step going back in time order is a new attempt."""

from __future__ import annotations

from trainpulse_otel.diagnose.joblife.attempts import AttemptLedger

T0 = 1000.0


def test_a_late_report_of_an_earlier_step_is_no_new_attempt():
    ledger = AttemptLedger()
    ledger.progress(T0 + 7.0, 24041)  # a node that back-filled its warm-up, heard first
    ledger.progress(T0, 24037)  # the leading node's older report: earlier step, earlier time
    ledger.progress(T0 + 8.0, 24042)
    assert len(ledger.attempts) == 1 and ledger.interruptions == 0
    assert ledger.attempts[0].last_step == 24042


def test_the_step_going_back_later_in_time_is_a_new_attempt():
    ledger = AttemptLedger()
    ledger.progress(T0, 100)
    ledger.progress(T0 + 10.0, 110)
    assert ledger.progress(T0 + 20.0, 101) is not None
    assert len(ledger.attempts) == 2 and ledger.interruptions == 1
