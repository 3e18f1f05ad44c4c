"""torchtitan: MetricsProcessor dicts (percent MFU, per-device tps, seconds) and console lines."""

import pytest

from trainpulse_otel.adapters import torchtitan
from trainpulse_otel.samples import SampleError

METRICS = {
    "loss_metrics/global_avg_loss": 9.8712,
    "loss_metrics/global_max_loss": 10.1034,
    "grad_norm": 1.8834,
    "n_tokens_seen": 5242880,
    "throughput(tps)": 6812.4,
    "tflops": 394.54,
    "mfu(%)": 39.89,
    "time_metrics/end_to_end(s)": 1.2027,
    "time_metrics/data_loading(s)": 0.0113,
    "time_metrics/data_loading(%)": 0.94,
    "memory/max_active(GiB)": 58.11,
    "memory/max_active(%)": 73.45,
    "memory/max_reserved(GiB)": 61.02,
    "memory/max_reserved(%)": 77.13,
    "memory/num_alloc_retries": 0,
    "memory/num_ooms": 0,
    "lr": 8e-4,
}


def test_units_are_converted():
    result = torchtitan.translate({**METRICS, "world_size": 64, "step": 10})
    sample = result.sample()
    assert sample.mfu == pytest.approx(0.3989)  # percent -> fraction
    assert sample.tokens_per_sec == pytest.approx(6812.4 * 64)  # per device -> job
    assert sample.step_time_ms == pytest.approx(1202.7) and sample.data_wait_ms == pytest.approx(11.3)  # s -> ms
    assert sample.tflops == 394.54  # per device in both vocabularies
    assert (sample.loss, sample.grad_norm, sample.learning_rate, sample.global_step) == (9.8712, 1.8834, 8e-4, 10)
    assert {"memory/max_active(GiB)", "time_metrics/data_loading(%)", "n_tokens_seen"} <= set(result.ignored)


def test_job_tokens_are_not_derivable_without_world_size():
    result = torchtitan.translate({**METRICS, "step": 10})
    assert "tokens_per_sec" not in result.payload
    assert any("throughput(tps)" in n and "world_size" in n for n in result.notes)


def test_learning_rate_per_optimizer_and_validation_metrics():
    result = torchtitan.translate(
        {
            "lr/AdamW/group_0": 3e-4,
            "mfu(%)": 20.0,
            "validation_metrics/loss": 2.5,
            "validation_metrics/throughput(tps)": 20113.0,
            "step": 100,
        }
    )
    assert result.sample().learning_rate == 3e-4
    assert "validation_metrics/loss" in result.ignored


def test_mfu_over_100_percent_is_rejected_naming_torchtitans_key():
    with pytest.raises(SampleError) as err:
        torchtitan.translate({"mfu(%)": 140.0}).sample()
    assert err.value.field == "mfu(%)"


def test_console_line_with_colours_newest_complete_training_line(fixture_text):
    result = torchtitan.translate_text(fixture_text("torchtitan_console.log"), {"world_size": 8})
    sample = result.sample()
    # step 20 was cut off and the validate line is not training: step 10 is the record
    assert (sample.global_step, sample.loss, sample.grad_norm, sample.tflops) == (10, 9.8712, 1.8834, 394.54)
    assert sample.mfu == pytest.approx(0.3989) and sample.tokens_per_sec == pytest.approx(6812 * 8)


def test_2024_console_line_with_wps(fixture_text):
    sample = torchtitan.translate_text(fixture_text("torchtitan_2024_wps.log"), {"world_size": 2}).sample()
    assert (sample.global_step, sample.loss, sample.tokens_per_sec) == (10, 9.1234, 5678 * 2)
    assert sample.mfu == pytest.approx(0.3325)


def test_text_without_a_training_line():
    with pytest.raises(SampleError, match="torchtitan"):
        torchtitan.translate_text("[titan] Building llama3 8B with ModelArgs(...)\n", {})
