"""Megatron-LM: console logs in every form, TensorBoard scalars, native OTel names."""

import pytest

from trainpulse_otel.adapters import megatron
from trainpulse_otel.samples import SampleError


def test_current_log_uses_newest_complete_iteration_and_its_timers(fixture_text):
    result = megatron.translate_text(fixture_text("megatron_core_minmax.log"), {})
    sample = result.sample()
    # iteration 300 was cut off mid-line, so 200 is the newest complete record
    assert sample.global_step == 200
    assert sample.step_time_ms == 3961.7 and sample.tflops == 388.0
    assert sample.learning_rate == pytest.approx(3.0e-5) and sample.global_batch_size == 512
    assert sample.loss == pytest.approx(6.987001) and sample.grad_norm == pytest.approx(1.876)
    # timers: the largest rank's milliseconds; level-2 batch-generator is the data wait
    assert sample.data_wait_ms == 14.10 and sample.all_reduce_wait_ms == 150.50
    assert sample.sync_wait_ms == pytest.approx(90.05 + 99.95 + 238.00 + 128.00)
    # iteration 100's checkpoint belongs to iteration 100, not to the newest record
    assert sample.checkpoint_ms is None
    assert sample.samples_per_sec == pytest.approx(512 / 3.9617)
    assert sample.framework == "megatron"
    assert "consumed samples" in result.ignored and "timer forward-backward" in result.ignored


def test_checkpoint_timer_merges_into_the_iteration_it_follows(fixture_text):
    text = fixture_text("megatron_core_minmax.log")
    upto_checkpoint = text[: text.index(" [2026-08-01 12:13:20")]
    sample = megatron.translate_text(upto_checkpoint, {}).sample()
    assert sample.global_step == 100
    assert sample.checkpoint_ms == 41301.99
    assert sample.all_reduce_wait_ms == 143.87 and sample.data_wait_ms == 12.34


def test_2024_log_with_max_timers_and_torchrun_prefixes(fixture_text):
    sample = megatron.translate_text(fixture_text("megatron_2024_max_torchrun.log"), {}).sample()
    assert (sample.global_step, sample.step_time_ms, sample.tflops) == (20, 1198.6, 171.3)
    assert sample.loss == pytest.approx(8.754321)
    assert (sample.all_reduce_wait_ms, sample.data_wait_ms) == (51.20, 2.05)


def test_timing_log_option_all_gives_each_rank_its_own_step_time(fixture_text):
    result = megatron.translate_text(fixture_text("megatron_all_ranks.log"), {})
    sample = result.sample()
    assert [r.rank for r in sample.ranks] == list(range(8))
    slow = sample.ranks[5]
    # forward-backward minus the all-grads-sync it spent waiting for peers
    assert slow.step_time_ms == pytest.approx(2012.9 - 35.1)
    assert slow.all_reduce_wait_ms == 35.1 and slow.data_wait_ms == 1.4
    assert sample.ranks[0].step_time_ms == pytest.approx(1702.1 - 345.2)
    assert sample.all_reduce_wait_ms == 349.0  # the largest rank's


def test_pre_2022_log_with_one_line_timers_and_srun_prefix(fixture_text):
    sample = megatron.translate_text(fixture_text("megatron_2021_oneline_timers.log"), {}).sample()
    assert (sample.global_step, sample.step_time_ms) == (200, 866.4)
    assert sample.loss == pytest.approx(6.123456) and sample.grad_norm == pytest.approx(0.456)
    assert (sample.data_wait_ms, sample.all_reduce_wait_ms) == (3.33, 60.40)


def test_megatron_deepspeed_tokens_from_sequence_length_and_tgs(fixture_text):
    text = fixture_text("megatron_deepspeed_tgs.log")
    without_world = megatron.translate_text(text, {}).sample()
    assert (without_world.global_step, without_world.step_time_ms, without_world.tflops) == (200, 14541.4, 68.63)
    assert without_world.samples_per_sec == 52.815 and without_world.max_seq_len == 4096
    assert without_world.tokens_per_sec == pytest.approx(52.815 * 4096)  # samples/s x seq len
    with_world = megatron.translate_text(text, {"world_size": 48}).sample()
    assert with_world.tokens_per_sec == pytest.approx(1126.713 * 48)  # tgs is per GPU


def test_bigscience_seconds_per_iteration(fixture_text):
    sample = megatron.translate_text(fixture_text("megatron_bigscience_seconds.log"), {}).sample()
    assert sample.step_time_ms == pytest.approx(11180.0)
    assert (sample.global_step, sample.tflops, sample.samples_per_sec) == (13910, 40.83, 91.621)


def test_context_supplies_what_the_log_lacks():
    line = (
        " iteration       10/    1000 | consumed samples:         2560 | elapsed time per iteration (ms): 1000.0 |"
        " learning rate: 1.000000E-04 | global batch size:   256 | lm loss: 8.000000E+00 | loss scale: 1.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    sample = megatron.translate_text(line, {"seq_length": 2048, "model_name": "gpt3-1.3b"}).sample()
    assert sample.samples_per_sec == 256.0 and sample.tokens_per_sec == 256.0 * 2048
    assert sample.model_name == "gpt3-1.3b" and sample.max_seq_len == 2048


def test_model_without_lm_loss_uses_its_own_loss_key():
    line = (
        " iteration       10/    1000 | consumed samples:          320 | elapsed time per iteration (ms): 500.0 |"
        " learning rate: 1.000000E-04 | global batch size:    32 | sop loss: 6.931472E-01 | loss scale: 1.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    assert megatron.translate_text(line, {}).sample().loss == pytest.approx(0.6931472)


def test_text_without_an_iteration_line_is_an_error_that_says_so():
    with pytest.raises(SampleError, match="no complete Megatron iteration line"):
        megatron.translate_text("building GPT model ...\n> number of parameters on rank 0: 1234\n", {})


def test_tensorboard_scalars_are_seconds_and_become_milliseconds():
    scalars = {
        "iteration-time": 3.9542,
        "throughput": 388.7,
        "learning-rate": 1.5e-05,
        "batch-size": 512.0,
        "lm loss": 7.412345,
        "lm loss vs samples": 7.412345,
        "loss-scale": 1.0,
        "world-size": 64,
        "grad-norm": 2.345,
        "num-zeros": 0.0,
        "params-norm": 812.5,
        "mem-allocated-bytes": 2.4e10,
        "forward-backward-time": 3.70254,
        "all-grads-sync-time": 0.14387,
        "batch-generator-time": 0.01234,
        "forward-recv-time": 0.09533,
        "backward-recv-time": 0.10177,
    }
    result = megatron.translate({"metrics": scalars, "step": 100})
    sample = result.sample()
    assert sample.step_time_ms == pytest.approx(3954.2)
    assert sample.all_reduce_wait_ms == pytest.approx(143.87) and sample.data_wait_ms == pytest.approx(12.34)
    assert sample.sync_wait_ms == pytest.approx(95.33 + 101.77)
    assert (sample.tflops, sample.world_size, sample.global_batch_size, sample.global_step) == (388.7, 64, 512, 100)
    assert sample.loss == pytest.approx(7.412345) and sample.grad_norm == 2.345
    assert {"lm loss vs samples", "mem-allocated-bytes", "params-norm"} <= set(result.ignored)


def test_megatron_native_opentelemetry_names():
    sample = megatron.translate(
        {
            "megatron.training.step_duration_ms": 3954.2,
            "megatron.training.loss": 7.41,
            "megatron.training.throughput_tflops": 388.7,
            "megatron.training.tokens_per_sec": 530412.0,
            "megatron.training.grad_norm": 2.3,
            "megatron.training.learning_rate": 1.5e-5,
            "megatron.training.memory_allocated_gb": 61.2,
            "megatron.training.skipped_iters": 0,
            "step": 100,
        }
    ).sample()
    assert (sample.step_time_ms, sample.loss, sample.tflops, sample.tokens_per_sec) == (3954.2, 7.41, 388.7, 530412.0)
    assert (sample.grad_norm, sample.learning_rate, sample.global_step) == (2.3, 1.5e-5, 100)


def test_a_wrong_type_is_blamed_on_the_megatron_key():
    with pytest.raises(SampleError) as err:
        megatron.translate({"iteration-time": "slow"})
    assert err.value.field == "iteration-time"


def test_hostile_text_is_read_in_linear_time():
    """A long run of name characters inside a timer block once made the timer search quadratic."""
    iteration = " iteration 1/ 2 | elapsed time per iteration (ms): 5.0 |\n"
    for header in ("(min, max) time across ranks (ms):", "max time across ranks (ms):", "times across ranks (ms):"):
        hostile = iteration + header + "\n" + "a" * 60_000 + "\n" + ("ab " * 20_000 + "\n") * 8
        assert megatron.translate_text(hostile, {}).sample().step_time_ms == 5.0
    too_long = iteration.rstrip("\n") + " lm loss: 1.0 |" * 10_000  # longer than any real log line: skipped
    with pytest.raises(SampleError):
        megatron.translate_text(too_long, {})
