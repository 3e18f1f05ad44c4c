"""An error line no form reads is classed by its words (:mod:`trainpulse_otel.logs.words`), as a paste's last line
alone often is; a form that reads the failure just after it wins.

The lines are the labelled corpus's ``train`` split (tests/fixtures/logs/corpus/index.json cites each file), fed
alone, as a user pastes only a traceback's last line.
"""

from __future__ import annotations

import pytest

from tests.logs.excerpts import TRAIN, line_of, told_alone
from trainpulse_otel.logs import words
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.samples import CUDA_OOM, PROCESS_FAILED, TRANSPORT_ERROR, WATCHDOG_TIMEOUT

# (corpus file, words of its line, the event kind the line alone tells)
ALONE = [
    (
        "deepspeed_network_error_eks-efa-ofi-unresponsive-receiver-broadcast.log",
        "torch.distributed.DistBackendError: NCCL error in",
        TRANSPORT_ERROR,
    ),
    (
        "diffusers_rank_crashed_colab-sdxl-lora-trained-then-sigkill-loading-pipeline.log",
        "subprocess.CalledProcessError: Command",
        PROCESS_FAILED,
    ),
    (
        "maxtext_collective_timeout_orbax-async-checkpoint-barrier-deadline-exceeded-8-of-16.log",
        "XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out",
        WATCHDOG_TIMEOUT,
    ),
]


@pytest.mark.parametrize(("name", "said", "kind"), ALONE)
def test_an_exception_line_alone_is_classed_by_its_words(name, said, kind):
    assert told_alone(line_of(name, said))[:1] == [kind]


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("RuntimeError: NCCL communicator was aborted on rank 3.", "crash"),
        ("2025-01-07 10:00:01 ERROR allreduce timed out after 600 s on rank 5", "timeout"),
        ("E0107 10:00:01.123456 4242 hccl_comm.cc:88] HCCL broadcast timeout", "timeout"),
        ("[ERROR] Connection reset by peer while sending to 10.0.0.7", "link"),
        ("ERROR: failed to allocate 2.00 GiB on device 0 (out of memory)", "oom"),
    ],
)
def test_error_words_say_the_class(line, kind):
    said = words.error_said(line)
    assert said is not None and said[0] == kind and said[1]["from_words"] is True


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: pip's dependency resolver does not currently take into account all the packages",  # no failure word
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",  # the host's
        (
            "(EngineCore_DP0 pid=22) ERROR 09-24 20:59:57 [core.py:790]     return self.model_executor.collective_rpc("
            "method, timeout, args,"
        ),  # a traceback's source line, ``timeout`` an argument
        "UserWarning: NCCL timeout is set to 600 seconds",  # a warning
        "step 100 loss 2.31 lr 1e-4",
        "CommandNotFoundError: Your shell has not been properly configured to use 'conda activate'.",  # the shell's
        "CondaError: Run 'conda init' before 'conda activate'",
    ],
)
def test_lines_that_are_no_error_in_words(line):
    said = words.error_said(line)
    assert said is None or (said[0] == "crash" and "OutOfMemory" in line)


def test_a_form_that_reads_the_failure_after_the_exception_line_wins():
    """mp.spawn's re-raise, then the child's gloo timeout: the timeout, not a crash guessed from the re-raise."""
    excerpt = (TRAIN / "detectron2_collective_timeout_gloo-send-timeout-allgather-at-evaluation.log").read_text()
    kinds = told_alone(*excerpt.splitlines())
    assert kinds[0] == WATCHDOG_TIMEOUT, kinds


def test_a_guess_waits_its_lines_then_is_told_once():
    scanner = FailureScanner()
    assert scanner.feed("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.") == []
    told = [f for _ in range(words.GUESS_LINES) for f in scanner.feed("some unrelated line") or ()]
    assert [f.kind for f in told] == [PROCESS_FAILED]
    assert told[0].details["exception"] == "RuntimeError"
    assert not scanner.feed("ValueError: another error")  # the stream told a failure: no more guesses
    assert scanner.flush() == []


def test_only_a_streams_first_failure_is_guessed():
    kinds = told_alone("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "ERROR: rank 3 died")
    assert kinds == [CUDA_OOM]


def test_a_glog_error_line_s_words_are_read_though_its_prefix_is_cut():
    """``[rank3]:E0107 … hccl_comm.cc:88] HCCL broadcast timeout``: the reader cuts the glog prefix, the level stays."""
    line = "[rank3]:E0107 10:00:01.123456 4242 hccl_comm.cc:88] HCCL broadcast timeout"
    assert told_alone(line) == [WATCHDOG_TIMEOUT]
    assert told_alone(line.replace(":E0107", ":I0107")) == []  # an info line's words are no failure
