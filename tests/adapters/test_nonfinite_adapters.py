"""A diverged loss through every framework adapter: NaN/inf loss and grad norm are data, skipped steps and
the loss scale are read, and a NaN anywhere else is a 400 naming the framework's own key."""

from __future__ import annotations

import math

import pytest

from trainpulse_otel.adapters import deepspeed, generic, hf_trainer, lightning_metrics, megatron, pytorch, torchtitan
from trainpulse_otel.samples import SampleError

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("adapter", "payload"),
    [
        (generic, {"loss": NAN, "grad_norm": INF, "step_time_ms": 900.0}),
        (pytorch, {"loss": NAN, "grad_norm": INF}),
        (hf_trainer, {"logs": {"loss": NAN, "grad_norm": INF, "learning_rate": 1e-4}, "step": 40}),
        (lightning_metrics, {"train_loss": NAN, "grad_2.0_norm_total": INF}),
        (torchtitan, {"loss_metrics/global_avg_loss": NAN, "grad_norm": INF, "step": 10}),
        (megatron, {"lm loss": NAN, "grad-norm": INF, "iteration-time": 1.2}),
        (megatron, {"megatron.training.loss": NAN, "megatron.training.grad_norm": INF}),
        (deepspeed, {"Train/Samples/train_loss": NAN, "grad_norm": INF}),
    ],
    ids=lambda v: getattr(v, "__name__", "").rsplit(".", 1)[-1] or None,
)
def test_every_dict_adapter_keeps_a_nan_loss_and_an_infinite_grad_norm(adapter, payload):
    sample = adapter.ADAPTER.normalize(payload)
    assert math.isnan(sample.loss) and sample.grad_norm == INF


def test_a_model_specific_megatron_loss_may_be_nan_too():
    assert math.isnan(megatron.ADAPTER.normalize({"mtp loss": NAN, "iteration-time": 1.0}).loss)


@pytest.mark.parametrize(
    ("adapter", "payload", "key"),
    [
        (generic, {"loss": NAN, "tokens_per_sec": NAN}, "tokens_per_sec"),
        (hf_trainer, {"logs": {"loss": NAN, "train_samples_per_second": INF}}, "train_samples_per_second"),
        (megatron, {"lm loss": NAN, "iteration-time": NAN}, "iteration-time"),
        (torchtitan, {"loss_metrics/global_avg_loss": NAN, "mfu(%)": NAN}, "mfu(%)"),
    ],
)
def test_a_nan_elsewhere_is_an_error_naming_the_frameworks_key(adapter, payload, key):
    with pytest.raises(SampleError) as err:
        adapter.ADAPTER.normalize(payload)
    assert err.value.field == key


def test_megatron_skipped_iterations_and_loss_scale_as_tensorboard_scalars_and_otel_names():
    sample = megatron.ADAPTER.normalize({"lm loss": 2.5, "skipped_iters": 3, "loss-scale": 2048.0})
    assert (sample.skipped_steps, sample.loss_scale) == (3, 2048.0)
    assert megatron.ADAPTER.normalize({"megatron.training.skipped_iters": 1.0}).skipped_steps == 1


def test_megatron_log_line_with_a_nan_loss_and_skipped_iterations():
    line = (
        " iteration      300/  500000 | consumed samples:        76800 | elapsed time per iteration (ms): 1012.3 |"
        " learning rate: 3.000E-04 | global batch size:   256 | lm loss: NAN | loss scale: 1.0 |"
        " grad norm: NAN | number of skipped iterations:  10 | number of nan iterations:  10 |\n"
    )
    sample = megatron.ADAPTER.parse_text(line)
    assert math.isnan(sample.loss) and math.isnan(sample.grad_norm)
    assert (sample.skipped_steps, sample.loss_scale, sample.step_time_ms) == (10, 1.0, 1012.3)


def test_deepspeed_overflow_lines_count_skipped_steps_and_keep_the_newest_loss_scale():
    text = (
        "[2026-01-05 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
        "Skipping step. Attempted loss scale: 65536, reducing to 32768\n"
        "[2026-01-05 10:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
        "Skipping step. Attempted loss scale: 32768, reducing to 16384\n"
        "steps: 200 loss: nan iter time (s): 1.234 samples/sec: 51.862\n"
    )
    sample = deepspeed.ADAPTER.parse_text(text)
    assert (sample.skipped_steps, sample.loss_scale, sample.global_step) == (2, 16384.0, 200)
    assert math.isnan(sample.loss) and sample.step_time_ms == pytest.approx(1234.0)


def test_torchtitan_console_line_with_a_nan_loss_and_its_max_loss_across_ranks():
    line = (
        "[titan] 2026-01-05 10:13:02,010 - root - INFO - step: 30  loss:  nan  grad_norm:  nan  "
        "memory: 61.02GiB(77.13%)  tps: 6,812  tflops: 394.54  mfu: 39.89%\n"
    )
    sample = torchtitan.ADAPTER.parse_text(line, {"world_size": 8})
    assert math.isnan(sample.loss) and math.isnan(sample.grad_norm) and sample.tokens_per_sec == 6812 * 8
    assert torchtitan.ADAPTER.normalize({"loss_metrics/global_max_loss": 9.5, "step": 3}).loss_max == 9.5
