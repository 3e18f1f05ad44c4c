"""Plain PyTorch (DDP logging data, torchvision MetricLogger) and the generic adapter."""

import pytest

from trainpulse_otel.adapters import generic, pytorch
from trainpulse_otel.adapters.base import unwrap
from trainpulse_otel.samples import SampleError


def test_ddp_logging_data_nanoseconds_become_one_rank(fixture_json):
    result = pytorch.translate(fixture_json("pytorch_ddp_logging_data.json"))
    sample = result.sample()
    assert sample.world_size == 8 and sample.global_step == 1000
    (rank,) = sample.ranks
    assert rank.rank == 3
    assert rank.step_time_ms == pytest.approx((48213004 + 97441235) / 1e6)
    assert rank.all_reduce_wait_ms == pytest.approx((61018220 - 43512008) / 1e6)  # the exposed part only
    assert {"bucket_cap_bytes", "backend_name", "module_name"} <= set(result.ignored)


def test_torchvision_metric_logger_meters():
    sample = pytorch.translate(
        {
            "time": 0.3456,
            "data": 0.0123,
            "lr": 0.1,
            "loss": 6.91,
            "img/s": 740.7,
            "acc1": 0.1,
            "world_size": 8,
            "step": 10,
        }
    ).sample()
    assert sample.step_time_ms == pytest.approx(345.6) and sample.data_wait_ms == pytest.approx(12.3)
    assert sample.samples_per_sec == pytest.approx(740.7 * 8)
    assert (sample.learning_rate, sample.loss, sample.framework) == (0.1, 6.91, "pytorch")


def test_generic_passes_contract_fields_and_the_original_tools_keys():
    result = generic.translate(
        {
            "model": "llama-3-8b",
            "train_tokens_per_second": 1.2e6,
            "model_flops_utilization": 0.41,
            "gradient_allreduce_ms": 85.0,
            "global_batch_size": 1024,
            "gradient_accumulation_steps": 8,
            "step": 42,
            "step_time_ms": 910.0,
            "framework": "jax",
            "custom_thing": 1,
            "ranks": [{"rank": 0, "step_time_ms": 900.0}],
        }
    )
    sample = result.sample()
    assert (sample.model_name, sample.tokens_per_sec, sample.mfu, sample.all_reduce_wait_ms) == (
        "llama-3-8b",
        1.2e6,
        0.41,
        85.0,
    )
    assert (sample.global_batch_size, sample.gradient_accumulation_steps, sample.global_step) == (1024, 8, 42)
    assert sample.framework == "jax" and sample.ranks[0].step_time_ms == 900.0
    assert result.ignored == ("custom_thing",)


def test_unknown_keys_only_is_a_clear_error_listing_them():
    with pytest.raises(SampleError, match=r"nothing measurable.*foo, bar"):
        generic.translate({"foo": 1, "bar": 2}).sample()


def test_a_contract_error_is_blamed_on_the_alias_the_client_sent():
    with pytest.raises(SampleError) as err:
        generic.translate({"model_flops_utilization": 41}).sample()
    assert err.value.field == "model_flops_utilization" and "mfu" in err.value.message


def test_non_finite_and_non_object_inputs():
    with pytest.raises(SampleError, match="finite"):
        pytorch.translate({"time": float("inf")})
    with pytest.raises(SampleError, match="JSON object"):
        generic.translate([1, 2])  # type: ignore[arg-type]


def test_envelope_inner_dict_wins_over_context():
    assert unwrap({"metrics": {"loss": 1.0}, "loss": 2.0, "step": 3}) == {"loss": 1.0, "step": 3}
    assert unwrap({"loss": 2.0}) == {"loss": 2.0}
