"""The launcher restarting the job's workers, in the words of every agent built on torchrun's: an event that
begins a new attempt, told once per restart."""

from __future__ import annotations

import pytest

from trainpulse_otel.config import Settings
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.logs.launcher import workers_restarted
from trainpulse_otel.runtime import replay_logs
from trainpulse_otel.samples import JOB_CANCELLED, WORKERS_RESTARTED

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


#: slurmstepd's ``error("*** %s ON %s CANCELLED AT %s DUE TO … ***")`` (src/slurmd/slurmstepd/req.c), as users and
#: cluster docs quote it: Stanford Sherlock's requeue docs, IDRIS Jean Zay's node failure, a preempted job with
#: the timestamped prefix of newer releases; 25.05's ``DUE to SIGNAL`` and a bare ``scancel``.
CANCELLATIONS = [
    (
        "slurmstepd: error: *** JOB 31182239 ON sh-06-34 CANCELLED AT 2018-11-05T10:35:06 DUE TO JOB REQUEUE ***",
        {"job_id": "31182239", "node": "sh-06-34", "reason": "job_requeue", "end": "kill"},
    ),
    (
        (
            "slurmstepd: error: *** STEP 1943824.0 ON jean-zay-iam17 CANCELLED AT 2023-03-06T03:17:51 DUE TO NODE "
            "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
        ),
        {"job_id": "1943824.0", "node": "jean-zay-iam17", "reason": "node_failure", "end": "failure"},
    ),
    (
        (
            "[2026-03-25T10:34:07.531] error: *** JOB 11509447 ON nodeau01 CANCELLED AT 2026-03-25T10:34:07 DUE TO "
            "PREEMPTION ***"
        ),
        {"job_id": "11509447", "node": "nodeau01", "reason": "preemption", "end": "kill"},
    ),
    (
        "slurmstepd-gpu07: error: *** JOB 88 ON gpu07 CANCELLED AT 2025-06-01T00:00:00 DUE to SIGNAL Terminated ***",
        {"job_id": "88", "node": "gpu07", "reason": "signal", "end": "kill"},
    ),
    (
        "slurmstepd: error: *** JOB 88 ON gpu07 CANCELLED AT 2024-01-01T00:00:00 ***",
        {"job_id": "88", "node": "gpu07", "reason": "cancelled", "end": "kill"},
    ),
]


@pytest.mark.parametrize(("line", "details"), CANCELLATIONS)
def test_slurm_ending_the_job_is_an_event_that_ends_the_attempt(line, details):
    scanner = FailureScanner()
    (event,) = scanner.feed(line)
    assert event.kind == JOB_CANCELLED and event.details == details
    assert scanner.feed(line) == []  # told once per job and node


def test_a_job_slurm_preempted_and_requeued_is_two_attempts_the_first_killed(tmp_path):
    lines = [
        f"[2025-11-29 07:0{t // 60}:{t % 60:02d},000] step {t} | loss 2.5000 | step_time 1.000s" for t in range(1, 41)
    ]
    lines.append("slurmstepd: error: *** JOB 4242 ON gpu07 CANCELLED AT 2025-11-29T07:00:41 DUE TO PREEMPTION ***")
    lines += [
        f"[2025-11-29 07:0{t // 60}:{t % 60:02d},000] step {t - 80} | loss 2.5000 | step_time 1.000s"
        for t in range(101, 141)
    ]
    log = tmp_path / "slurm-4242.out"
    log.write_text("\n".join(lines) + "\n")
    job = replay_logs([str(log)], Settings()).result.diagnosis.goodput.to_dict()["job"]
    first, second = job["attempts"]
    assert (first["last_step"], first["end_reason"], second["first_step"]) == (40, "kill", 21)
    assert job["interruptions"] == 1
