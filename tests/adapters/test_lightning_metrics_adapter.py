"""Lightning: ThroughputMonitor keys (Trainer callback and Fabric), callback metric names."""

import pytest

from trainpulse_otel.adapters import lightning_metrics as lightning

#: ThroughputMonitor on 8 GPUs, stage-prefixed by the Trainer callback, window full.
EIGHT_GPUS = {
    "train/time": 1834.21,
    "train/batches": 4000,
    "train/samples": 32000,
    "train/lengths": 131072000,
    "train/device/batches_per_sec": 2.18,
    "train/device/samples_per_sec": 17.44,
    "train/device/items_per_sec": 71434.24,
    "train/device/flops_per_sec": 4.0321e14,
    "train/device/mfu": 0.4077,
    "train/batches_per_sec": 17.44,
    "train/samples_per_sec": 139.52,
    "train/items_per_sec": 571473.92,
    "train/flops_per_sec": 3.22568e15,
    "lr-AdamW": 2.5e-4,
    "grad_2.0_norm_total": 0.734,
    "train_loss": 2.417,
    "epoch": 0,
    "step": 3999,
}


def test_eight_gpu_throughput_monitor_keys():
    result = lightning.translate(EIGHT_GPUS)
    sample = result.sample()
    assert sample.mfu == 0.4077  # already a fraction
    assert sample.tflops == pytest.approx(403.21)
    assert sample.step_time_ms == pytest.approx(1000 / 2.18)
    assert sample.samples_per_sec == 139.52 and sample.tokens_per_sec == 571473.92  # the whole-job keys
    assert sample.world_size == 8  # 139.52 / 17.44
    assert (sample.learning_rate, sample.grad_norm, sample.loss, sample.global_step) == (2.5e-4, 0.734, 2.417, 3999)
    assert {"train/time", "train/batches", "train/flops_per_sec"} <= set(result.ignored)


def test_one_gpu_has_no_global_keys_so_the_job_equals_the_device():
    one = {k: v for k, v in EIGHT_GPUS.items() if not k.startswith("train/") or "/device/" in k or k == "train/time"}
    result = lightning.translate(one)
    sample = result.sample()
    assert sample.world_size == 1 and sample.samples_per_sec == 17.44 and sample.tokens_per_sec == 71434.24
    assert any("world_size = 1" in n for n in result.notes)


def test_given_world_size_scales_device_rates_and_accumulation_scales_step_time():
    sample = lightning.translate(
        {
            "train/device/batches_per_sec": 4.0,
            "train/device/samples_per_sec": 8.0,
            "world_size": 4,
            "gradient_accumulation_steps": 8,
            "step": 10,
        }
    ).sample()
    assert sample.samples_per_sec == 32.0
    assert sample.step_time_ms == pytest.approx(1000 * 8 / 4.0)


def test_fabric_throughput_monitor_logs_bare_keys():
    sample = lightning.translate(
        {
            "time": 100.0,
            "batches": 500,
            "samples": 4000,
            "device/batches_per_sec": 5.0,
            "device/samples_per_sec": 40.0,
            "batches_per_sec": 20.0,
            "samples_per_sec": 160.0,
            "device/mfu": 0.35,
            "step": 499,
        }
    ).sample()
    assert (sample.mfu, sample.samples_per_sec, sample.world_size, sample.step_time_ms) == (0.35, 160.0, 4, 200.0)


def test_validation_keys_are_ignored_with_a_note():
    result = lightning.translate(
        {"validate/device/samples_per_sec": 99.0, "validate/time": 3.0, "train/device/mfu": 0.3, "step": 5}
    )
    assert result.sample().samples_per_sec is None
    assert "validate/device/samples_per_sec" in result.ignored and result.notes


def test_rates_missing_until_the_window_fills_leave_only_totals():
    result = lightning.translate({"train/time": 3.2, "train/batches": 10, "train/samples": 80, "step": 9})
    assert set(result.payload) <= {"global_step", "framework"}
