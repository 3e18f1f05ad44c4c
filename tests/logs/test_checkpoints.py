"""A trainer's words about its checkpoints: a save's duration as the time it blocked training, a load's as an
event the job's life books to the restart it ends."""

from __future__ import annotations

import time

import pytest

from trainpulse_otel.config import Settings
from trainpulse_otel.logs.checkpoints import checkpoint_said
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.logs.statements import statement
from trainpulse_otel.runtime import replay_logs
from trainpulse_otel.samples import CHECKPOINT_LOADED

T0 = 1_764_400_000.0

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


#: Other frameworks' lines, as users pasted them or their source prints them (the source and release of each:
#: the module docstring of trainpulse_otel/logs/checkpoints.py and docs/logs.md).
SAVES = [
    # torchtitan since 2026-06 (PR #3393): the save's and the async staging's own wording
    ("[rank0]:[titan] 2026-07-01 10:00:00,000 - root - INFO - Finished saving the checkpoint in 1.25 seconds.", 1.25),
    ("[titan] 2026-07-01 10:00:00,000 - root - INFO - Finished staging the checkpoint in 0.31 seconds.", 0.31),
    # NeMo 2.3+ (nemo/lightning/io/pl.py), rank 0's
    (
        (
            "[NeMo I 2026-02-17 17:59:05 nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: 49 : "
            "Start time: 1771351145.879s : Save duration: 5.330s"
        ),
        5.33,
    ),
    ("Global Checkpoint Save : Rank: 0 : Start time: 1771351145.879s : Save duration: 0.200s", 0.2),
]
LOADS = [
    (
        (
            "[NeMo I 2025-04-11 14:46:18 nemo_logging:393] Global Checkpoint Load : Rank : 0 : Start time : "
            "1744407969.270s : Time spent in load_checkpoint: 9.712s"
        ),
        {"duration_s": 9.712},
    ),
    # Megatron-LM's load timer in its three forms: (min, max), max, and the one-line timers before 2022
    ("    load-checkpoint ................................: (4542.10, 4542.10)", {"duration_s": 4.5421}),
    ("INFO:megatron.core.timers:    load-checkpoint ..............: (3001.00, 3120.50)", {"duration_s": 3.1205}),
    ("    load-checkpoint ................................: 812.40", {"duration_s": 0.8124}),
    ("time (ms) | load-checkpoint: 160.00", {"duration_s": 0.16}),
    # Megatron-LM's load, every era's: 2.x, core 0.6-0.9, core 0.10+
    ("  successfully loaded checkpoint from /workspace/megatron-models/345m at iteration 5000", {"step": 5000}),
    ("  successfully loaded checkpoint from /mnt/ckpt [ t 0, p 0 ] at iteration 0", {"step": 0}),
    ("  successfully loaded checkpoint from /mnt/ckpt [ t 1/4, p 2/2 ] at iteration 1200", {"step": 1200}),
    # Hugging Face Trainer: to 5.2, and 5.3+
    (
        "[INFO|trainer.py:2061] 2024-06-11 11:06:44,678 >>   Continuing training from global step 12386778",
        {"step": 12386778},
    ),
    ("  Resuming training from checkpoint with epoch 2 and global step 1200", {"step": 1200}),
    # Lightning 2.x and 1.x
    ("Restored all states from the checkpoint at /output/PDB/2021-10-10/checkpoints/0-1250.ckpt", {}),
    ("Restored all states from the checkpoint file at checkpoints/ffhq128_autoenc_130M/last.ckpt", {}),
    # Composer
    ("Trainer checkpoint loaded from s3://bucket/run/ep0-ba200-rank0.pt", {}),
]
NOT_LOADS = [
    "Loaded model weights from the checkpoint at /ckpt/last.ckpt",  # Lightning's validate/test: no resume
    "Loading best model from out/checkpoint-500 (score: 0.12).",  # the Trainer's end of training
    "Global Checkpoint Load : Rank : 3 : Start time : 1744407969.270s : Time spent in load_checkpoint: 9.7s",
    "Global Checkpoint Save : Rank: 5 : Start time: 1771351145.879s : Save duration: 5.330s",
    "    save-checkpoint ................................: (21027.08, 21027.08)",  # read with its iteration
    "WARNING: could not find the metadata file checkpoints/latest_checkpointed_iteration.txt",
]


@pytest.mark.parametrize(("line", "seconds"), SAVES)
def test_other_frameworks_saves_are_the_time_they_blocked_training(line, seconds):
    assert checkpoint_said(line) == ("save", {"duration_s": pytest.approx(seconds)})
    assert statement(line) == {"checkpoint_ms": pytest.approx(seconds * 1000.0)}


@pytest.mark.parametrize(("line", "details"), LOADS)
def test_other_frameworks_finished_loads_are_events_with_what_they_say(line, details):
    (event,) = FailureScanner().feed(line)
    assert event.kind == CHECKPOINT_LOADED and event.details == pytest.approx(details)


@pytest.mark.parametrize("line", NOT_LOADS)
def test_lines_that_are_no_resume_or_another_rank_s_copy_are_no_load(line):
    assert not [e for e in FailureScanner().feed(line) or () if e.kind == CHECKPOINT_LOADED]
    assert statement(line) is None


def megatron_line(t: float, iteration: int) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(T0 + t))
    return (
        f" [{stamp}] iteration {iteration:8d}/    1000 | consumed samples: {iteration * 16:12d} | elapsed time per "
        "iteration (ms): 1000.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 2.500000E+00 | "
        "loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )


def test_a_megatron_log_resumed_by_its_scheduler_is_two_attempts_from_its_load_line(tmp_path):
    """No launcher line: Slurm requeued the job, which printed Megatron's load line and its timer, then did
    iterations 31-40 again. The re-done iterations are the new attempt's, not another rank's copies."""
    lines = [megatron_line(t, t) for t in range(1, 41)]
    lines += [
        " loading checkpoint from /ckpt at iteration 30",
        "  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/1 ] at iteration 30",
        "(min, max) time across ranks (ms):",
        "    load-checkpoint ................................: (7000.00, 7000.00)",
    ]
    lines += [megatron_line(t + 60, t) for t in range(31, 61)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    goodput = replay_logs([str(log)], Settings(interval=1.0)).result.diagnosis.goodput.to_dict()
    first, second = goodput["job"]["attempts"]
    assert (first["last_step"], second["first_step"], second["last_step"]) == (40, 31, 60)
    assert goodput["job"]["lost_s"]["lost_progress"] == pytest.approx(10.0, abs=1.0)
    assert goodput["job"]["lost_s"]["checkpoint_load"] == pytest.approx(7.0)
