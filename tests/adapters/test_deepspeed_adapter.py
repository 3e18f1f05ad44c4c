"""DeepSpeed: console lines of current and old releases, the pipeline engine, monitor events."""

import pytest

from trainpulse_otel.adapters import deepspeed
from trainpulse_otel.samples import SampleError


def test_current_log_pairs_the_newest_step_with_its_own_breakdown(fixture_text):
    result = deepspeed.translate_text(fixture_text("deepspeed_0.16_breakdown.log"), {"train_batch_size": 256})
    sample = result.sample()
    # step 20 is the newest numbered step; its breakdown (fwd 432.40) is the one printed right after it,
    # not step 21's (fwd 433.40), which has no step number
    assert sample.global_step == 20
    assert sample.step_time_ms == pytest.approx(432.40 + 830.21 + 61.30)
    assert sample.all_reduce_wait_ms == pytest.approx(130.16)
    assert sample.learning_rate == pytest.approx(2.9999e-05)
    assert sample.samples_per_sec == pytest.approx(201.67531276)
    assert sample.global_batch_size == 256 and sample.framework == "deepspeed"
    assert "RunningAvgSamplesPerSec" in result.ignored


def test_step_time_from_the_throughput_timer_when_there_is_no_breakdown():
    line = (
        "[2025-02-11 09:20:20,140] [INFO] [timer.py:264:stop] epoch=0/micro_step=80/global_step=20, "
        "RunningAvgSamplesPerSec=203.41230011, CurrSamplesPerSec=200.0, MemAllocated=10.12GB, MaxMemAllocated=31.47GB"
    )
    sample = deepspeed.translate_text(line, {"train_batch_size": 256}).sample()
    assert sample.step_time_ms == pytest.approx(1000 * 256 / 200.0)
    unknown_batch = deepspeed.translate_text(line, {})
    assert "step_time_ms" not in unknown_batch.payload and unknown_batch.sample().samples_per_sec == 200.0


def test_release_0_7_names_and_rank_prefix(fixture_text):
    result = deepspeed.translate_text(fixture_text("deepspeed_0.7_old_names.log"), {"train_batch_size": 64})
    sample = result.sample()
    assert sample.global_step == 50 and sample.learning_rate == 0.00015
    assert sample.step_time_ms == pytest.approx(96.01 + 191.00 + 31.00)
    assert sample.all_reduce_wait_ms == pytest.approx(19.89)
    # the old throughput line times one micro-step: a rate, never turned into a step time
    assert sample.samples_per_sec == pytest.approx(111.9028371)
    assert result.mapped["step_time_ms"] != "CurrSamplesPerSec (micro-step)"


def test_pipeline_engine_line_and_receive_waits(fixture_text):
    sample = deepspeed.translate_text(fixture_text("deepspeed_pipeline.log"), {}).sample()
    assert (sample.global_step, sample.loss, sample.samples_per_sec) == (20, 7.2345, 122.664)
    assert sample.step_time_ms == pytest.approx(2087.0)
    assert sample.sync_wait_ms == pytest.approx(80.01 + 139.50)


def test_breakdown_without_any_step_number_is_still_a_record():
    sample = deepspeed.translate_text(
        "[Rank 0] time (ms) | fwd: 10.00 | bwd: 20.00 | bwd_inner: 15.00 | bwd_allreduce: 5.00 | step: 3.00\n", {}
    ).sample()
    assert sample.step_time_ms == 33.0 and sample.global_step is None


def test_text_with_no_deepspeed_line_is_an_error():
    with pytest.raises(SampleError, match="no DeepSpeed"):
        deepspeed.translate_text("Using /root/.cache/torch_extensions as PyTorch extensions root...\n", {})


MONITOR = {
    "Train/Samples/train_loss": 2.3104,
    "Train/Samples/lr": 2.9999e-05,
    "Train/Samples/loss_scale": 65536.0,
    "Train/Samples/elapsed_time_ms_forward": 432.4,
    "Train/Samples/elapsed_time_ms_backward": 830.21,
    "Train/Samples/elapsed_time_ms_backward_inner": 700.05,
    "Train/Samples/elapsed_time_ms_backward_allreduce": 130.16,
    "Train/Samples/elapsed_time_ms_step": 61.3,
}


def test_monitor_events_flat_with_samples_axis_converted_to_steps():
    result = deepspeed.translate(
        {
            **MONITOR,
            "global_samples": 5120,
            "train_batch_size": 256,
            "train_micro_batch_size_per_gpu": 8,
            "gradient_accumulation_steps": 4,
        }
    )
    sample = result.sample()
    assert sample.global_step == 20  # 5120 samples / 256 per step
    assert sample.loss == 2.3104 and sample.learning_rate == 2.9999e-05
    assert sample.step_time_ms == pytest.approx(432.4 + 830.21 + 61.3) and sample.all_reduce_wait_ms == 130.16
    assert (sample.global_batch_size, sample.micro_batch_size, sample.gradient_accumulation_steps) == (256, 8, 4)
    assert sample.loss_scale == 65536.0 and "Train/Samples/loss_scale" not in result.ignored  # fp16 scaler


def test_monitor_event_tuples_keep_the_sample_axis_when_the_batch_size_is_unknown():
    events = [[name, value, 5120] for name, value in MONITOR.items()]
    events.insert(0, ["Train/Samples/train_loss", 2.9, 4864])  # an older point of the same series
    result = deepspeed.translate({"events": events})
    assert result.sample().loss == 2.3104
    assert "global_step" not in result.payload
    assert any("global_samples 5120" in note and "train_batch_size" in note for note in result.notes)


def test_monitor_events_as_objects_and_a_bad_event_named():
    sample = deepspeed.translate(
        {"events": [{"name": "Train/Samples/train_loss", "value": 2.0, "global_samples": 512}], "train_batch_size": 256}
    ).sample()
    assert (sample.loss, sample.global_step) == (2.0, 2)
    with pytest.raises(SampleError) as err:
        deepspeed.translate({"events": [["Train/Samples/train_loss", 2.0]]})
    assert err.value.field == "events[0]"
