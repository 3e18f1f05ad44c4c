"""A trainer's words about its checkpoints: a save's duration as the time it blocked training, a load's as an
event the job's life books to the restart it ends."""

from __future__ import annotations

import pytest

from trainpulse_otel.logs.checkpoints import checkpoint_said
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.logs.statements import statement
from trainpulse_otel.samples import CHECKPOINT_LOADED

#: torchtitan's lines as its users quote them (a torchtitan docs page on failures after the last save; a
#: write-up of a fine-tune), and the f-strings of torchtitan/components/checkpoint.py.
SAVE_ASYNC = (
    "[rank0]:2025-04-01 00:25:59,616 - root - INFO - Finished saving the checkpoint (or staging if async is "
    "enabled)in 5.53 seconds."
)
SAVE = "[titan] Finished saving the checkpoint in 0.60 seconds."
LOAD = "Finished loading the checkpoint in 54.49 seconds."
LOADING = "[rank0]:[titan] 2025-06-01 10:00:00,000 - root - INFO - Loading the checkpoint at step 10."


@pytest.mark.parametrize(("line", "seconds"), [(SAVE_ASYNC, 5.53), (SAVE, 0.60)])
def test_a_save_is_the_time_it_blocked_training(line, seconds):
    assert checkpoint_said(line) == ("save", {"duration_s": seconds})
    assert statement(line) == {"checkpoint_ms": pytest.approx(seconds * 1000.0)}


def test_a_load_is_an_event_with_its_duration_and_the_step_line_is_read_too():
    assert checkpoint_said(LOADING) == ("loading", {"step": 10})
    (event,) = FailureScanner().feed(LOAD)
    assert event.kind == CHECKPOINT_LOADED and event.details == {"duration_s": 54.49}
    assert statement(LOAD) is None  # no report of its own
    for other in ("No checkpoint was provided, this is a fresh start.", "Saving the checkpoint."):
        assert checkpoint_said(other) is None
