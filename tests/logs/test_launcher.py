"""The launcher restarting the job's workers, in the words of every agent built on torchrun's: an event that
begins a new attempt, told once per restart."""

from __future__ import annotations

import pytest

from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.logs.launcher import workers_restarted
from trainpulse_otel.samples import WORKERS_RESTARTED

#: torch.distributed.elastic.agent.server.api's ``log.info('[%s] Worker group %s. %s/%s attempts left; will restart
#: worker group', …)`` (PyTorch 1.9 on; with Python's default logging prefix, and bare), NVIDIA's ft_launcher (as
#: its README quotes it, prefix elided there) and DLRover's agent (its ``diagnosis`` module's f-string).
WORDINGS = [
    (
        (
            "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 3/3 attempts left; "
            "will restart worker group"
        ),
        {"state": "FAILED", "remaining": 3, "max_restarts": 3, "role": "default"},
    ),
    (
        ("[default] Worker group UNHEALTHY. 1/2 attempts left; will restart worker group"),
        {"state": "UNHEALTHY", "remaining": 1, "max_restarts": 2, "role": "default"},
    ),
    (
        "[INFO] [ft_launcher...] [default] Worker group FAILED. 3/5 attempts left; will restart worker group",
        {"state": "FAILED", "remaining": 3, "max_restarts": 5, "role": "default"},
    ),
    (
        "[dlrover] Worker group FAILED, is failure node: False,2/3 attempts left; will restart worker group.",
        {"state": "FAILED", "remaining": 2, "max_restarts": 3, "role": "dlrover"},
    ),
]


@pytest.mark.parametrize(("line", "details"), WORDINGS)
def test_each_agent_s_restart_line_is_a_workers_restarted_event(line, details):
    assert workers_restarted(line) == details
    (event,) = FailureScanner().feed(line)
    assert event.kind == WORKERS_RESTARTED and dict(event.details) == details


def test_a_restart_is_told_once_per_attempt_left_and_other_words_are_none():
    scanner = FailureScanner()
    line = WORDINGS[0][0]
    assert len(scanner.feed(line)) == 1 and scanner.feed(line) == []  # a second node's agent says the same
    assert len(scanner.feed(line.replace("3/3", "2/3"))) == 1  # the next restart
    for other in ("[default] Worker group SUCCEEDED.", "Cannot restart workers with fatal error.", "restart later"):
        assert workers_restarted(other) is None


def test_the_steps_a_restarted_attempt_does_again_are_reports_not_another_rank_s_copies():
    from trainpulse_otel.logs import LogLine, LogReader
    from trainpulse_otel.samples import TrainingSample

    lines = [
        "step 1 | loss 2.3000 | step_time 0.050s",
        "step 2 | loss 2.2000 | step_time 0.050s",
        "step 3 | loss 2.1000 | step_time 0.050s",
        WORDINGS[0][0],
        "step 2 | loss 2.2100 | step_time 0.050s",  # the new attempt, resumed from the step-1 checkpoint
        "step 3 | loss 2.1100 | step_time 0.050s",
    ]
    reader = LogReader()
    out = [item for n, text in enumerate(lines, 1) for item in reader.feed(LogLine(text, "job.log", n))]
    out += reader.flush()
    steps = [item.global_step for item in out if isinstance(item, TrainingSample)]
    assert steps == [1, 2, 3, 2, 3]
    assert [item.kind for item in out if not isinstance(item, TrainingSample)] == [WORKERS_RESTARTED]
