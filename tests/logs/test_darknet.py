"""Darknet's per-batch lines: the iteration, the running average loss, the rate and the batch's seconds; a NaN in
either loss; srun's task label is not read into them. Lines as public pages print them (code index 29164606517,
a YOLOv3 write-up; 10983822093, a YOLOv2 README; 47163725853, a YOLOv4 journal)."""

from __future__ import annotations

import math

from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.darknet import DarknetLines
from trainpulse_otel.logs.labels import split_label
from trainpulse_otel.samples import TrainingSample

WRITE_UP = [
    "11000: 0.051831, 0.085730 avg loss, 0.001000 rate, 0.886196 seconds, 2816000 images",
    "15000: 0.055898, 0.075187 avg loss, 0.001000 rate, 0.768312 seconds, 3840000 images",
    "15300: 0.053958, 0.071382 avg loss, 0.001000 rate, 1.472932 seconds, 3916800 images",
]


def test_a_batch_line_is_a_report_of_its_average_loss_rate_and_seconds():
    (one,) = DarknetLines().feed(
        "   4259: 0.034688, 0.045240 avg loss, 0.001000 rate, 0.923000 seconds, 272576 images", 5.0
    )
    assert one == {
        "global_step": 4259,
        "timestamp": 5.0,
        "loss": 0.045240,
        "step_time_ms": 923.0,
        "learning_rate": 0.001,
    }
    assert DarknetLines().feed("Region Avg IOU: 0.872156, Class: 0.999678, Obj: 0.859775, count: 11", 0.0) is None


def test_a_nan_loss_is_the_report_s_and_hours_left_do_not_matter():
    line = "  70: -nan, -nan avg loss, 0.000000 rate, 332.178208 seconds, 4480 images, 717.177361 hours left"
    (one,) = DarknetLines().feed(line, 0.0)
    assert one["global_step"] == 70 and math.isnan(one["loss"])


def test_a_darknet_line_is_no_srun_label_but_a_labelled_one_keeps_its_task():
    assert split_label("  70: -nan, -nan avg loss, 0.000000 rate, 332.178208 seconds, 4480 images") == (
        None,
        "  70: -nan, -nan avg loss, 0.000000 rate, 332.178208 seconds, 4480 images",
    )
    assert split_label("3: 11000: 0.051831, 0.085730 avg loss, 0.001000 rate")[0] == 3


def test_a_darknet_log_replays_as_darknet_s_every_batch_a_report():
    reader = LogReader()
    out = [r for i, t in enumerate(WRITE_UP) for r in reader.feed(LogLine(t, source="darknet.log", ts=float(i)))]
    reports = [r for r in out if isinstance(r, TrainingSample)]
    assert [r.global_step for r in reports] == [11000, 15000, 15300]
    assert reports[0].loss == 0.085730 and reader.stats.parsers == {"darknet": 3}
