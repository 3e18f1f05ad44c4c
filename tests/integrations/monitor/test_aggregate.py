"""One interval's buffered steps → one training report (pure)."""

from __future__ import annotations

import pytest

from trainpulse_otel.integrations.monitor.aggregate import (
    ALL_REDUCE,
    CHECKPOINT,
    DATA,
    PHASES,
    SYNC,
    JobContext,
    StepRecord,
    aggregate,
    build_sample,
)
from trainpulse_otel.mfu import ModelShape
from trainpulse_otel.samples import RankSample, parse_training, to_dict

JOB = JobContext(fields={"model_name": "m", "framework": "pytorch"})


def step(step_s=0.1, outside_s=0.0, tokens=None, samples=None, seq_lens=None, padded_len=None, end=100.0, **phases):
    times = [0.0] * len(PHASES)
    for name, seconds in phases.items():
        times[PHASES.index(name)] = seconds
    return StepRecord(end, step_s, outside_s, times, tokens, samples, seq_lens, padded_len)


def test_iteration_time_includes_waits_outside_the_step():
    records = [step(0.1, outside_s=0.05, data=0.05), step(0.3, outside_s=0.15, data=0.15, end=101.0)]
    out = aggregate(records, JOB, frozenset({DATA}), global_step=7)
    assert out["step_time_ms"] == pytest.approx(300.0)  # mean of 150 and 450
    assert out["data_wait_ms"] == pytest.approx(100.0)
    assert out["timestamp"] == 101.0 and out["global_step"] == 7
    assert "sync_wait_ms" not in out  # never measured: unknown, not zero


def test_phases_measured_once_report_zero_afterwards():
    out = aggregate([step()], JOB, frozenset({SYNC, ALL_REDUCE}), None)
    assert out["sync_wait_ms"] == 0.0 and out["all_reduce_wait_ms"] == 0.0


def test_checkpoint_is_the_longest_save_not_a_mean():
    records = [step(checkpoint=2.0), step(), step(), step()]
    assert aggregate(records, JOB, frozenset({CHECKPOINT}), None)["checkpoint_ms"] == pytest.approx(2000.0)


def test_throughput_is_job_wide_over_iteration_time():
    job = JobContext(fields={}, world_size=4, data_parallel_size=4)
    records = [step(0.5, outside_s=0.5, tokens=1000, samples=10)] * 2
    out = aggregate(records, job, frozenset(), None)
    assert out["tokens_per_sec"] == pytest.approx(4000.0)  # 1000 per second per rank × 4 ranks
    assert out["samples_per_sec"] == pytest.approx(40.0)


def test_steps_without_counts_do_not_dilute_the_rate():
    out = aggregate([step(1.0, tokens=100), step(1.0)], JOB, frozenset(), None)
    assert out["tokens_per_sec"] == pytest.approx(100.0)


def test_padding_statistics_give_the_exact_padded_fraction():
    records = [step(seq_lens=[10, 20], padded_len=20), step(seq_lens=[5, 5, 10, 20], padded_len=40)]
    out = aggregate(records, JOB, frozenset(), None)
    real, padded = 10 + 20 + 5 + 5 + 10 + 20, 2 * 20 + 4 * 40
    assert out["avg_seq_len"] == pytest.approx(real / 6)
    assert out["max_seq_len"] == pytest.approx(padded / 6)
    assert out["avg_seq_len"] <= out["max_seq_len"]


def test_padding_defaults_to_the_longest_and_never_below_it():
    out = aggregate([step(seq_lens=[4, 8], padded_len=2)], JOB, frozenset(), None)
    assert out["max_seq_len"] == 8 and out["avg_seq_len"] == 6


def test_mfu_from_model_shape_uses_the_padded_length():
    shape = ModelShape(matmul_params=1_000_000, attention_width=256)
    job = JobContext(fields={}, world_size=2, data_parallel_size=2, shape=shape, peak_flops=1e12)
    records = [step(1.0, tokens=1000, seq_lens=[100] * 10, padded_len=128)]
    out = aggregate(records, job, frozenset(), None)
    per_token = 6 * 1_000_000 + 12 * 256 * 128
    achieved = per_token * out["tokens_per_sec"] / 2
    assert out["tflops"] == pytest.approx(achieved / 1e12)
    assert out["mfu"] == pytest.approx(achieved / 1e12)


def test_mfu_is_capped_at_one_and_absent_without_a_peak():
    job = JobContext(fields={}, flops_per_token=1e12, peak_flops=1e12)
    assert aggregate([step(1.0, tokens=10)], job, frozenset(), None)["mfu"] == 1.0
    no_peak = JobContext(fields={}, flops_per_token=1e6)
    out = aggregate([step(1.0, tokens=10)], no_peak, frozenset(), None)
    assert "mfu" not in out and out["tflops"] == pytest.approx(1e-5)


def test_tensor_like_lengths_and_counts_are_read_at_drain():
    class Lengths:  # what a tensor offers: .tolist()
        def tolist(self):
            return [3, 5]

    class Count:
        def __float__(self):
            return 8.0

    out = aggregate([step(1.0, tokens=Count(), seq_lens=Lengths())], JOB, frozenset(), None)
    assert out["tokens_per_sec"] == 8.0 and out["avg_seq_len"] == 4.0


def test_built_sample_layers_job_measured_and_given_fields_and_validates():
    job = JobContext(fields={"model_name": "m", "precision": "bf16"}, world_size=2)
    ranks = (RankSample(rank=0, step_time_ms=1.0), RankSample(rank=1, step_time_ms=2.0))
    fields = aggregate([step(tokens=100)], job, frozenset(), 3, ranks)
    sample = build_sample(fields, job, {"loss": 1.5, "tokens_per_sec": 42.0})
    assert sample.tokens_per_sec == 42.0 and sample.loss == 1.5 and sample.world_size == 2
    assert sample.precision == "bf16" and len(sample.ranks) == 2
    assert parse_training(to_dict(sample)) == sample  # what the daemon's validation accepts


def test_nothing_measured_builds_nothing():
    assert build_sample(aggregate([], JOB, frozenset(), 5), JOB, {}) is None
    assert build_sample({}, JOB, {"global_step": 3}) is None
