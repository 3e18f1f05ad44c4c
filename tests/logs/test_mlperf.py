"""MLPerf Training's ``:::MLLOG`` records: ``train_loss`` and ``tracked_stats`` are reports, numbered by the
metadata's step or its samples over the run's global batch; every other record is claimed and says nothing; a
record's ``time_ms`` is the line's time. The log is the corpus's (its ``train`` split)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trainpulse_otel.config import Settings
from trainpulse_otel.logs.lines import split_prefixes
from trainpulse_otel.logs.mlperf import MLPerfLines
from trainpulse_otel.runtime import replay_logs

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus" / "train"
LORA = CORPUS / "mlperf_healthy_llama2-70b-lora-deepspeed-mllog-json-only.log"


def _line(key: str, value: object, **metadata: object) -> str:
    meta = ", ".join(f'"{k}": {v}' for k, v in {"file": '"train.py"', "lineno": 102, **metadata}.items())
    value_text = "null" if value is None else str(value).replace("'", '"')
    return (
        f':::MLLOG {{"namespace": "", "time_ms": 1715111634920, "event_type": "POINT_IN_TIME", "key": "{key}", '
        f'"value": {value_text}, "metadata": {{{meta}}}}}'
    )


def test_a_train_loss_record_is_a_report_numbered_by_its_samples_over_the_global_batch():
    mlperf = MLPerfLines()
    assert mlperf.feed(_line("train_loss", 3.7, samples_count=320), 1.0) == [
        {"global_step": 320, "timestamp": 1.0, "loss": 3.7}
    ]  # no global batch given yet: the samples count the steps
    assert mlperf.feed(_line("global_batch_size", 32), 2.0) == []
    (report,) = mlperf.feed(_line("train_loss", "NaN", samples_count=640), 3.0)
    assert report["global_step"] == 20 and math.isnan(report["loss"])


def test_tracked_stats_give_throughput_and_step_time_an_evaluation_its_step_and_other_records_nothing():
    mlperf = MLPerfLines()
    evaluated = MLPerfLines()  # a log of evaluations and epochs only (BERT's): they number the progress
    assert evaluated.feed(_line("eval_accuracy", 0.92, samples_count=960), 1.0) == [
        {"global_step": 960, "timestamp": 1.0}
    ]
    assert evaluated.feed(_line("eval_accuracy", 0.90, step=500), 2.0) == []  # an earlier checkpoint's, after the run
    assert evaluated.feed(_line("epoch_stop", None, epoch_num=1000), 3.0) == [{"global_step": 1000, "timestamp": 3.0}]
    (stats,) = mlperf.feed(_line("tracked_stats", {"throughput": 12.5, "train_step_time": 2.5}, step=100), 0.0)
    assert stats == {"global_step": 100, "timestamp": 0.0, "samples_per_sec": 12.5, "step_time_ms": 2500.0}
    assert mlperf.feed(_line("eval_accuracy", 0.92, samples_count=960), 1.0) == []  # its units may be samples
    assert mlperf.feed(_line("block_start", None, first_epoch_num=1), 1.0) == []
    assert mlperf.feed(':::MLLOG {"namespace": "", "time_ms": 17151116', 1.0) == []  # cut short: claimed
    assert mlperf.feed("Epoch 1: loss 2.3", 1.0) is None


def test_a_record_s_time_ms_is_its_line_s_time():
    rank, when, rest = split_prefixes(_line("train_loss", 3.7, samples_count=320))
    assert rank is None and when == pytest.approx(1715111634.92) and rest.startswith(":::MLLOG {")


def test_an_mllog_only_run_replays_with_every_train_loss_a_report_and_no_signal():
    done = replay_logs([str(LORA)], Settings())
    losses = sum(1 for line in LORA.read_text().splitlines() if '"key": "train_loss"' in line)
    assert done.reader.stats.losses == losses > 0  # and its evaluations' steps, progress without a loss
    assert done.reader.stats.parsers == {"mlperf": done.reader.stats.reports}
    assert done.result.diagnosis.signals == ()
