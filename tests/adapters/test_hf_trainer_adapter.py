"""Hugging Face Trainer: on_log dicts, token speed metrics, end-of-train metrics, trainer_state.json."""

import pytest

from trainpulse_otel.adapters import hf_trainer as huggingface
from trainpulse_otel.samples import SampleError


def test_on_log_dict_with_the_step_beside_it():
    result = huggingface.translate(
        {"logs": {"loss": 2.1432, "grad_norm": 0.8412, "learning_rate": 1.98e-05, "epoch": 0.12}, "step": 120}
    )
    sample = result.sample()
    assert (sample.loss, sample.grad_norm, sample.learning_rate, sample.global_step) == (2.1432, 0.8412, 1.98e-05, 120)
    assert sample.framework == "huggingface" and result.ignored == ("epoch",)


def test_top_level_global_step_and_missing_grad_norm():
    sample = huggingface.translate({"loss": 1.5, "learning_rate": 1e-5, "epoch": 1.0, "global_step": 7}).sample()
    assert sample.global_step == 7 and sample.grad_norm is None


def test_on_log_token_speed_is_a_whole_job_running_average():
    result = huggingface.translate(
        {
            "logs": {
                "loss": 2.0,
                "learning_rate": 2e-5,
                "epoch": 0.5,
                "num_input_tokens_seen": 52428800,
                "train_runtime": 1200.5,
                "train_tokens_per_second": 43672.1,
            },
            "step": 400,
        }
    )
    assert result.sample().tokens_per_sec == 43672.1
    assert "num_input_tokens_seen" in result.ignored


END_OF_TRAIN = {
    "train_runtime": 3605.2341,
    "train_samples_per_second": 69.234,
    "train_steps_per_second": 0.541,
    "total_flos": 4.123456789e18,
    "train_loss": 2.0876543,
    "epoch": 3.0,
    "train_tokens_per_second": 4417.3,
}


def test_end_of_train_metrics_with_world_size():
    result = huggingface.translate({**END_OF_TRAIN, "world_size": 8, "step": 1950})
    sample = result.sample()
    assert sample.step_time_ms == pytest.approx(1000 / 0.541)
    assert sample.samples_per_sec == 69.234 and sample.loss == 2.0876543
    assert sample.tokens_per_sec == pytest.approx(4417.3 * 8)  # per device at the end of train()
    assert sample.tflops == pytest.approx(4.123456789e18 / 3605.2341 / 8 / 1e12)


def test_end_of_train_tokens_per_device_are_left_out_without_world_size():
    result = huggingface.translate(END_OF_TRAIN)
    assert "tokens_per_sec" not in result.payload and "tflops" not in result.payload
    assert any("train_tokens_per_second" in n and "world_size" in n for n in result.notes)
    assert result.sample().samples_per_sec == 69.234


def test_global_batch_from_training_arguments():
    sample = huggingface.translate(
        {
            "logs": {"loss": 2.0},
            "step": 10,
            "per_device_train_batch_size": 4,
            "gradient_accumulation_steps": 8,
            "world_size": 16,
        }
    ).sample()
    assert (sample.micro_batch_size, sample.global_batch_size, sample.gradient_accumulation_steps) == (4, 512, 8)


def test_evaluation_only_dict_is_not_a_training_measurement():
    result = huggingface.translate(
        {
            "logs": {
                "eval_loss": 2.2,
                "eval_runtime": 41.2,
                "eval_samples_per_second": 121.3,
                "eval_steps_per_second": 3.8,
                "epoch": 0.77,
            },
            "step": 500,
        }
    )
    assert any("evaluation" in note for note in result.notes)
    with pytest.raises(SampleError, match="eval_loss"):
        result.sample()


def test_trainer_state_uses_its_newest_training_entry(fixture_json):
    sample = huggingface.translate(fixture_json("huggingface_trainer_state.json")).sample()
    assert sample.global_step == 1950  # the end-of-train entry, not the eval entries before it
    assert sample.loss == 2.0876543 and sample.samples_per_sec == 69.234


def test_a_non_numeric_value_names_the_hf_key():
    with pytest.raises(SampleError) as err:
        huggingface.translate({"logs": {"train_steps_per_second": "fast"}})
    assert err.value.field == "train_steps_per_second"
