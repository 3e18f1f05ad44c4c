"""A stall a log shows only by its stamps: time passing after the last iteration, and nothing else said.

:class:`ProgressClock` holds the silence and tells it only when it is one (the log ends in it, or the steps did
not cross it); the stall detector judges it (:mod:`trainpulse_otel.diagnose.detectors.silence`). Real excerpts of
the corpus's ``train`` split show a save that never returned and a healthy run whose excerpt skips hours.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.logs.excerpts import excerpt_signals as signals
from tests.logs.excerpts import replayed_signals
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose.detectors.silence import told_message
from trainpulse_otel.logs.account import account
from trainpulse_otel.logs.bars import BarClock, progress_report
from trainpulse_otel.logs.lines import split_prefixes, yearless_clock, yearless_time
from trainpulse_otel.logs.progress import MIN_GAP_S, ProgressClock
from trainpulse_otel.logs.stats import ReadStats
from trainpulse_otel.runtime import replay_logs


def test_a_silence_is_told_when_the_log_ends_in_it_not_before():
    clock = ProgressClock()
    for step, ts in ((1, 0.0), (2, 3.0), (3, 6.0)):
        assert clock.progress(ts, step) is None
    clock.line(6.0 + MIN_GAP_S / 2, "noise")  # too short to hold
    clock.line(20.0, "Saving model checkpoint to out/checkpoint-3")
    clock.line(640.0, "^C[2024-05-26 15:06:40,046] [INFO] [launch.py:315:sigkill_handler] Killing subprocess")
    told = clock.flush()
    assert told is not None and told["gap_s"] == 634.0 and told["phase"] == "checkpoint" and told["last_step"] == 3


def test_a_silence_the_steps_crossed_at_their_pace_is_lines_left_out():
    clock = ProgressClock()
    for step, ts in ((10, 0.0), (20, 10.0), (30, 20.0)):
        clock.progress(ts, step)
    clock.line(1000.0, "2020-12-10 14:11:02 | INFO | valid | …")
    assert clock.progress(1010.0, 1020) is None  # ~1 step a second for ~1,000 s: the excerpt skipped lines
    clock.line(2000.0, "a stamped line")
    assert clock.progress(2010.0, 1030) is not None  # one log interval in ~1,000 s: it stood still


def test_a_line_that_says_the_run_is_over_ends_the_watch():
    clock = ProgressClock()
    clock.progress(0.0, 1)
    clock.progress(10.0, 2)
    clock.line(20.0, "2020-12-11 06:26:58 | INFO | fairseq_cli.train | done training in 65106.5 seconds")
    clock.line(9000.0, "a stamped line long after")
    assert clock.flush() is None


def test_a_save_that_never_returned_is_a_stall(tmp_path):
    # steps every 3-5 s, "Saving model checkpoint" at 14:56:22, then only the user's ^C at 15:06:40
    raised = signals("huggingface_training_stalled_peft-deepspeed-save-after-epoch.log", tmp_path)
    stall = raised["training_stalled"]
    assert stall["inferred_from"] == "log_stamps" and stall["phase"] == "checkpoint" and stall["stalled_s"] > 600


def test_an_excerpt_that_skips_hours_of_a_healthy_run_is_no_stall(tmp_path):
    # fairseq: steps 25, 50, then 10025: the lines between were left out; then the end-of-run summary
    assert "training_stalled" not in signals("fairseq_healthy_sweep-mock-json-done-training.log", tmp_path)


def test_an_epoch_s_evaluation_its_metrics_name_is_a_pause_not_a_stall(tmp_path):
    # GluonNLP: batches every ~3 s, then 56 s of ``[Epoch 0] valid Loss=…``, ``test Loss=…`` and ``Save best
    # parameters``: an evaluation and a save, judged by their own, longer bound
    assert "training_stalled" not in signals("gluonnlp_healthy_gnmt-en-vi-epoch-boundary.log", tmp_path)
    clock = ProgressClock()
    clock.progress(0.0, 10)
    clock.progress(3.0, 20)
    clock.line(40.0, "[Epoch 0] valid Loss=2.8567, valid ppl=17.4045, valid bleu=2.95")
    assert clock.flush()["phase"] == "eval"


def test_an_evaluation_s_counter_moving_is_no_silence_and_one_standing_still_is(tmp_path):
    # FADNet (2019): 12 minutes of stamped ``Test: [N/547]`` lines between the epochs' iteration lines
    assert "training_stalled" not in signals("pytorch_healthy_fadnet-dispnetc-4gpu.log", tmp_path)
    clock = ProgressClock()
    clock.progress(0.0, 10)
    clock.progress(3.0, 20)
    for i, ts in enumerate(range(20, 800, 20)):
        clock.line(float(ts), f"INFO Test: [{i * 10}/547]\t Time 0.87\t EPE 4.6")
    assert clock.progress(805.0, 21)["gap_s"] == 17.0  # the longest silence: before the first Test line
    for ts in (820.0, 840.0, 1500.0):
        clock.line(ts, "INFO Test: [30/547]\t Time 0.87\t EPE 4.6")  # the count stood still from 820 s
    told = clock.flush()
    assert told is not None and told["since"] == 805.0 and told["gap_s"] == 695.0


def test_a_silence_a_collective_s_watchdog_ends_is_that_timeout_not_a_stall(tmp_path):
    # InternNav (round 37): the last loss at 18:02, ten minutes of stamped "training processes running" lines, then
    # rank 4's watchdog: ALLREDUCE timed out after 600000 ms — the hang was the collective's
    raised = signals("huggingface_collective_timeout_internnav-allreduce-10min.log", tmp_path)
    assert "collective_timeout" in raised and "training_stalled" not in raised
    clock = ProgressClock()
    clock.progress(0.0, 1)
    clock.progress(5.0, 2)
    clock.line(600.0, "There are 6 training processes running")
    clock.caught(1200.0)
    clock.line(1300.0, "a stamped line of the job's end")
    assert clock.flush() is None


def _replayed(lines: list[str], tmp_path: Path) -> dict[str, dict]:
    path = tmp_path / "console.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    seen: dict[str, dict] = {}
    replay_logs([str(path)], Settings(), on_result=lambda step: [
        seen.setdefault(s.name, dict(s.evidence)) for s in step.diagnosis.signals
    ])  # fmt: skip
    return seen


def test_a_bar_drawn_again_at_its_count_hours_later_is_a_stall_and_a_finished_one_is_not(tmp_path):
    # tqdm draws a bar again when it closes (a ^C after a hang): its own elapsed time is the clock
    clock = BarClock()
    clock.feed(" 10%|█         | 102/1000 [01:42<14:58,  1.00it/s]", 0.0)
    clock.feed(" 10%|█         | 103/1000 [01:43<14:57,  1.00it/s]", 1.0)
    clock.feed(" 10%|█         | 103/1000 [2:01:43<14:57:00,  58.3s/it]", 2.0)
    gap = clock.flush()
    assert gap is not None and gap["gap_s"] == 7200.0 and gap["last_step"] == 103 and gap["interval_s"] == 1.0
    # drawn again after a pause (an evaluation, a save), then stepping on: no silence
    clock.feed(" 10%|█         | 103/1000 [2:01:43<14:57:00,  58.3s/it]", 3.0)
    clock.feed(" 10%|█         | 103/1000 [2:03:43<14:57:00,  58.3s/it]", 4.0)
    clock.feed(" 10%|█         | 104/1000 [2:03:44<14:57:00,  57.9s/it]", 5.0)
    assert clock.flush() is None
    # a training bar, then an evaluation's finished bar of as many steps: two bars, no silence
    done = BarClock()
    for line in ("[1:19:17<00:00,  2.59it/s]", "[49:31<00:00,  4.15it/s]", "[1:20:41<00:00,  2.55it/s]"):
        done.feed(f"100%|██████████| 12328/12328 {line}", 0.0)
    assert done.flush() is None
    bars = [f" 10%|█         | {n}/1000 [01:{n - 60}<14:00,  1.00it/s]" for n in range(100, 104)]
    interrupted = [*bars, " 10%|█         | 103/1000 [2:01:43<14:57:00,  58.3s/it]"]
    interrupted += [
        "Traceback (most recent call last):",
        '  File "train.py", line 40, in <module>',
        "KeyboardInterrupt",
    ]
    seen = _replayed(interrupted, tmp_path)
    assert "training_stalled" in seen and "rank_crashed" not in seen  # the user's ^C is no crash


def test_slurm_s_cancellation_says_its_time_and_a_time_limit_after_a_silence_is_a_stall(tmp_path):
    cancel = "slurmstepd: error: *** JOB 4242 ON node7 CANCELLED AT 2023-03-01T14:00:03 DUE TO TIME LIMIT ***"
    assert split_prefixes(cancel) == (None, 1677679203.0, cancel)
    steps = [f"[2023-03-01 10:00:0{i},000] step {100 + i} | loss 2.3{i}" for i in range(4)]
    assert "training_stalled" in _replayed([*steps, cancel], tmp_path)
    in_time = cancel.replace("14:00:03", "10:00:04")
    assert "training_stalled" not in _replayed([*steps, in_time], tmp_path)


def test_a_job_the_time_limit_ends_long_after_its_run_said_it_was_over_hung_on_its_way_out(tmp_path):
    """Megatron-Bridge's ``[after training is done] datetime: …``, then Slurm's ``CANCELLED AT … DUE TO TIME
    LIMIT`` eight minutes later: the job never exited. One stamped reading is the fact: the stall is raised."""
    stalled = signals("megatron-bridge_training_stalled_qwen3-30b-exit-hang-slurm-time-limit.log", tmp_path)
    told = stalled["training_stalled"]
    assert told["phase"] == "exit" and told["stalled_s"] == 479.0 and told["inferred_from"] == "log_stamps"


def test_a_run_over_then_silent_is_no_stall_unless_the_scheduler_ends_it():
    clock = ProgressClock()
    clock.progress(0.0, 10)
    clock.line(5.0, "[after training is done] datetime: 2025-12-03 14:45:03")
    clock.line(900.0, "saving the final model")
    assert clock.flush() is None
    clock.line(1000.0, "slurmstepd: error: *** STEP 42.0 ON n1 CANCELLED AT 2025-12-03T15:01:40 DUE TO TIME LIMIT ***")
    assert clock.flush() == {
        "since": 5.0,
        "gap_s": 995.0,
        "last_step": 10,
        "line": "slurmstepd: error: *** STEP 42.0 ON n1 CANCELLED AT 2025-12-03T15:01:40 DUE TO TIME LIMIT ***",
        "phase": "exit",
    }


def test_any_scheduler_cancellation_long_after_the_run_said_it_was_over_is_an_exit_hang(tmp_path):
    """Slurm ends a step that is still running, whatever the reason its line gives — here cut before it (the train
    split's Megatron excerpt: its last iteration, ``[after training is done]``, then ``*** STEP … ON`` 8 minutes
    later)."""
    clock = ProgressClock()
    clock.progress(0.0, 50)
    clock.line(1.0, "[after training is done] datetime: 2026-04-20 03:17:08")
    clock.line(496.0, "error: *** STEP 1942963.1 ON")
    assert clock.flush() == {
        "since": 1.0,
        "gap_s": 495.0,
        "last_step": 50,
        "line": "error: *** STEP 1942963.1 ON",
        "phase": "exit",
    }
    told = signals("megatron_training_stalled_exit-hang-after-final-iteration.log", tmp_path)["training_stalled"]
    assert told["phase"] == "exit" and told["stalled_s"] == 495.0
    assert "the process did not exit" in told_message(told)


def test_a_value_said_in_words_with_no_step_is_no_step_completing(tmp_path):
    """ESPnet's ``loss (=nan) is not correct`` warnings, hours apart: a NaN, and no step the lines number — the
    hours between them are no silence after progress."""
    lines = [
        "2019-06-13 02:30:01,545 (e2e_asr:302) WARNING: loss (=nan) is not correct",
        "2019-06-13 03:52:24,416 (e2e_asr:302) WARNING: loss (=14484257.000000) is not correct",
        "2019-06-13 05:06:23,975 (e2e_asr:302) WARNING: loss (=-186341) is not correct",
    ]
    seen = _replayed(lines, tmp_path)
    assert "nonfinite_loss" in seen and "training_stalled" not in seen


def test_processes_that_exit_successfully_end_the_run_not_a_silence(tmp_path):
    """DeepSpeed-Chat's last step, an evaluation and a final save (no stamps), then the launcher's ``Process …
    exits successfully``: 41 s with no step is the run's end."""
    assert "training_stalled" not in signals("deepspeed_healthy_chat-dpo-2025-tflops-lines.log", tmp_path)


def test_megatron_s_datetime_line_is_its_time():
    assert split_prefixes("[after training is done] datetime: 2025-12-03 14:45:03")[1] == 1764773103.0


def signals_of(text: str, tmp_path: Path) -> dict[str, dict]:
    path = tmp_path / "pasted.log"
    path.write_text(text + "\n")
    return replayed_signals(path)


@pytest.mark.parametrize(
    ("line", "stalled_s"),
    [
        # each hang detector's own words (values filled in), from its source
        (  # NVIDIA/nvidia-resiliency-ext: fault_tolerance's rank monitor
            "[2025-03-07 22:43:58,000] [WARNING] [RankMonServer4242@node7:3] Did not get subsequent heartbeat. Waited 1800.00 seconds.",
            1800.0,
        ),
        ("Timeout (0:30:00)!", 1800.0),  # python/cpython: faulthandler.dump_traceback_later's header
        (  # NVIDIA-NeMo/RL: nemo_rl/algorithms (its rollout watchdog)
            "WARNING: rollout stall -- no rollout committed and no train step completed in 900s (4 rollouts in flight, 0 groups committed, step 12/500)",
            900.0,
        ),
    ],
)
def test_a_hang_detector_s_words_are_the_stall_it_saw(line, stalled_s, tmp_path):
    told = signals_of(line, tmp_path)["training_stalled"]
    assert told["stalled_s"] == stalled_s and told["inferred_from"] == "log_stamps"


def test_a_hang_detector_that_says_no_time_met_its_own_threshold(tmp_path):
    line = "I0101 10:00:00.000000 1 torch/distributed/elastic/timer/file_based_local_timer.py:300] Reaping worker_pid=[1234]. Expired timers: ['step']"
    assert "training_stalled" in signals_of(
        line, tmp_path
    )  # torch elastic's timer reaped a worker that overran its scope


def test_a_faulthandler_dump_shorter_than_a_stall_is_none(tmp_path):
    assert "training_stalled" not in signals_of("Timeout (0:00:05)!", tmp_path)


def test_a_bar_whose_own_clock_holds_hours_beyond_its_count_is_a_stall_its_cut_traceback_the_hang_s_end(tmp_path):
    """YOLOv8's epoch 80 bar at 1.36 it/s, then epoch 81's ``9/351 [13:44:50<…, 5498.98s/it]`` and a traceback the
    paste cuts before its exception (the user's ^C after the hang; ultralytics/ultralytics#673, the corpus's train
    split): the time beyond 9 steps at the pace before is a silence, and the cut traceback is its end, no crash."""
    clock = BarClock()
    clock.feed("     80/400      29.9G     0.6966: 100%|██████████| 351/351 [04:18<00:00,  1.36it/s]", 0.0)
    clock.feed("     81/400      29.9G     0.7018:   3%|▎         | 9/351 [13:44:50<522:24:10, 5498.98s/it]", 1.0)
    gap = clock.flush()
    assert gap is not None and gap["gap_s"] == pytest.approx(49490 - 9 / 1.36, abs=0.01) and gap["last_step"] == 9
    slower = BarClock()  # a bar at a third of the pace before is a slowdown, no silence
    slower.feed(" 50%|█████     | 500/1000 [08:20<08:20,  1.00it/s]", 0.0)
    slower.feed(" 10%|█         | 100/1000 [05:00<45:00,  3.00s/it]", 1.0)
    assert slower.flush() is None
    seen = signals("ultralytics_training-stalled_epoch81-tqdm-13h.log", tmp_path)
    assert seen["training_stalled"]["stalled_s"] > 13 * 3600 and "rank_crashed" in seen
    path = tmp_path / "excerpt.log"
    causes = replay_logs([str(path)], Settings()).result.diagnosis.root_causes
    assert causes[0].signals == ("training_stalled",) and all(c.cause != "rank_failure" for c in causes)


def test_a_new_bar_s_slow_start_is_judged_as_a_pause_not_a_stall(tmp_path):
    """A bar's own clock holds its start (data-loader workers, a compile): a paste that ends in the next epoch's
    ``1/351 [00:45<…, 45.00s/it]`` after a bar at 1.36 it/s held a 44 s pause, under the pause's threshold
    (``save_or_eval_min_s``); 13 hours there (YOLOv8's) is a stall."""
    done = "     80/400      29.9G     0.6966: 100%|██████████| 351/351 [04:18<00:00,  1.36it/s]"
    clock = BarClock()
    clock.feed(done, 0.0)
    clock.feed("     81/400      29.9G     0.7018:   0%|          | 1/351 [00:45<4:22:30, 45.00s/it]", 1.0)
    gap = clock.flush()
    assert gap is not None and gap["phase"] == "start" and 40 < gap["gap_s"] < 45
    slow_start = [done, "     81/400      29.9G     0.7018:   0%|          | 1/351 [00:45<4:22:30, 45.00s/it]"]
    assert "training_stalled" not in _replayed(slow_start, tmp_path)


def test_a_bar_that_never_stepped_holds_its_whole_clock_as_silence(tmp_path):
    """tqdm draws a bar with no step yet as ``0/1000 [2:13:45<?, ?it/s]`` only when it closes (a ^C, a crash): two
    hours since it began, no step. Judged as a pause is (a first step may compile); a bar that then steps on was slow,
    not silent, and a draw under the pause's threshold is none."""
    stuck = "Epoch 0:   0%|          | 0/1000 [2:13:45<?, ?it/s]"
    clock = BarClock()
    clock.feed("Epoch 0:   0%|          | 0/1000 [00:00<?, ?it/s]", 0.0)
    clock.feed(stuck, 1.0)
    assert clock.flush() == {"since": -8024.0, "gap_s": 8025.0, "last_step": 0, "phase": "start", "line": stuck}
    assert "training_stalled" in _replayed([stuck], tmp_path)
    stepped = [stuck.replace("2:13:45", "12:13"), "Epoch 0:   0%|          | 1/1000 [12:14<200:00:00, 734.00s/it]"]
    assert "training_stalled" not in _replayed(stepped, tmp_path)
    assert "training_stalled" not in _replayed([stuck.replace("2:13:45", "04:10")], tmp_path)


def test_a_log_whose_silence_its_own_clock_told_does_not_say_stalls_went_unjudged(tmp_path):
    path = tmp_path / "bar.log"
    path.write_text("Epoch 0:   0%|          | 0/1000 [2:13:45<?, ?it/s]\n")
    notes = " ".join(replay_logs([str(path)], Settings()).account.notes)
    assert "the silence was told by the log's own clock" in notes and "stalls) had nothing" not in notes
    bare = account(ReadStats(lines=3, reports=3, timed_by=Counter(line_order=3), kinds=Counter(progress_gap=1)), {})
    assert not any("cannot be seen" in note for note in bare.notes)


def test_of_a_terminal_s_carriage_returns_the_last_draw_is_the_bar():
    joined = "  0%|          | 0/8 [00:00<?, ?it/s] 12%|█▎        | 1/8 [01:53<13:12, 113.21s/it]"
    assert progress_report(joined) == {"global_step": 1, "step_time_ms": 113210.0}
    assert progress_report("  0%|          | 0/8 [00:00<?, ?it/s]") is None  # no rate yet: no report


def test_the_first_interval_a_step_ends_is_a_slow_step_not_a_silence():
    clock = ProgressClock()
    clock.progress(0.0, 1)
    clock.line(36.0, "INFO:tensorflow:[2021-03-28 02:17:55] Epoch 1, GStep 2~2")  # (its report told a line late)
    assert clock.progress(36.0, 1) is None  # no interval known yet: 36 s is the job's pace, not a stall
    clock.line(74.0, "a stamped line")
    clock.line(2000.0, "a stamped line long after")
    assert clock.flush()["gap_s"] == 1964.0  # once the pace is known, a silence is one


@pytest.mark.parametrize(
    "line",
    [
        "01/27/2026 02:27:10 - INFO - __main__ - ***** Running training *****",  # Hugging Face examples, Accelerate
        "[01/27/2026 02:27:10 INFO 140087617984320] Reading default configuration",  # SageMaker built-in algorithms
        "[2026/01/27 02:27:10] root INFO: train with paddle 2.1.2",  # PaddlePaddle
        "2026/01/27 02:27:10 - mmengine - INFO - Epoch(train) [1][50/100]",  # MMEngine
        "[I 2026-01-27 02:27:10,000] Trial 0 finished with value: 0.175",  # Optuna, Tornado
        "[NeMo W 2026-01-27 02:27:10 rerun_state_machine:1264] Implicit initialization",  # NeMo
        "INFO:tensorflow:[2026-01-27 02:27:10] Epoch 1, GStep 1~1, Loss 6.535",  # Python logging before the stamp
        "(WorkerDict pid=626895) INFO:2026-01-27 02:27:10,000:update_weights done",  # Ray's actor, then logging's
        "DLL 2026-01-27 02:27:10.000000 - (67, 8) train_iter_time : 0.75",  # NVIDIA dllogger
        "[Tue Jan 27 02:27:10 2026] NVRM: GPU at PCI:0000:9b:00",  # dmesg -T
        "LOG Tue Jan 27 02:27:10 2026 - (0, 78) step_loss : 9.1875",  # AWS Neuron
    ],
)
def test_other_loggers_stamps_are_the_line_s_time_and_the_line_is_kept_whole(line):
    rank, when, rest = split_prefixes(line)
    assert when == 1769480830.0 and rest == line and rank is None


@pytest.mark.parametrize(
    ("line", "clock"),
    [
        ("01/27 02:27:10 - mmengine - INFO - Epoch(train) [1][50/100]", "01-27T02:27:10.000000"),  # MMEngine's old
        ("[01/27 02:27:10 d2.utils.events]:  eta: 0:03:35  iter: 19", "01-27T02:27:10.000000"),  # detectron2
        ("01/27 02:27:10 PM args = Namespace(data='../datasets/cifar10')", "01-27T14:27:10.000000"),  # DARTS
        ("01/27 12:27:10 AM epoch 1", "01-27T00:27:10.000000"),
    ],
)
def test_a_month_and_day_without_a_year_is_read_as_glog_s_clock_is(line, clock):
    assert yearless_clock(line) == clock and split_prefixes(line)[1] is None


def test_a_stamp_that_is_no_date_is_none():
    for line in ("1/1 - 3s - loss: nan", "12/34/2026 10:00:00 x", "2026/01/27 - loss 3", "[10/31] loss 2.5"):
        assert split_prefixes(line)[1] is None and yearless_clock(line) is None
    assert yearless_time(yearless_clock("13/45 10:00:00 x"), 2026) is None  # no such day
