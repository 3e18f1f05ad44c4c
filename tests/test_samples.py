"""The one sample model: valid payloads parse, bad ones name their field."""

import math

import pytest

from trainpulse_otel.samples import (
    SampleError,
    parse_gpus,
    parse_host,
    parse_training,
    to_dict,
)

FULL_TRAINING = {
    "workload_kind": "pretraining",
    "model_family": "llama",
    "model_name": "llama-3-8b",
    "framework": "pytorch",
    "precision": "bf16",
    "global_step": 1200,
    "step_time_ms": 1450.5,
    "tokens_per_sec": 180000.0,
    "mfu": 0.43,
    "tflops": 410.0,
    "avg_seq_len": 4000,
    "max_seq_len": 4096,
    "data_wait_ms": 3.1,
    "tokenizer_wait_ms": 0.4,
    "sync_wait_ms": 12.0,
    "all_reduce_wait_ms": 90.0,
    "world_size": 8,
    "timestamp": 1764400000.5,
    "samples_per_sec": 44.0,
    "checkpoint_ms": 0,
    "pipeline_bubble_ratio": 0.0,
    "loss": 2.31,
    "grad_norm": 0.9,
    "learning_rate": 3e-4,
    "global_batch_size": 64,
    "micro_batch_size": 2,
    "gradient_accumulation_steps": 4,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "data_parallel_size": 8,
    "hostname": "node-0",
    "ranks": [
        {
            "rank": r,
            "gpu_index": r,
            "step_time_ms": 1400 + r,
            "tokens_per_sec": 22500,
            "hostname": "node-0",
            "data_wait_ms": 3,
            "sync_wait_ms": 10,
            "all_reduce_wait_ms": 90,
        }
        for r in range(8)
    ],
}


def test_full_payload_round_trips_through_to_dict():
    sample = parse_training(FULL_TRAINING)
    assert sample.mfu == 0.43 and sample.global_step == 1200
    assert [r.rank for r in sample.ranks] == list(range(8))
    assert parse_training(to_dict(sample)) == sample


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"step_time_ms": "fast"}, "step_time_ms"),
        ({"step_time_ms": -1}, "step_time_ms"),
        ({"step_time_ms": math.nan}, "step_time_ms"),
        ({"tokens_per_sec": math.inf}, "tokens_per_sec"),
        ({"mfu": 1.5}, "mfu"),
        ({"pipeline_bubble_ratio": -0.1}, "pipeline_bubble_ratio"),
        ({"step_time_ms": 1, "global_step": 1.5}, "global_step"),
        ({"step_time_ms": 1, "world_size": 0}, "world_size"),
        ({"step_time_ms": True}, "step_time_ms"),
        ({"step_time_ms": 1, "model_name": 7}, "model_name"),
        ({"step_time_ms": 1, "model_name": "x" * 300}, "model_name"),
        ({"avg_seq_len": 5000, "max_seq_len": 4096}, "avg_seq_len"),
        ({"ranks": "all"}, "ranks"),
        ({"ranks": [{"step_time_ms": 3}]}, "ranks[0].rank"),
        ({"ranks": [{"rank": 0}, {"rank": 1, "step_time_ms": -3}]}, "ranks[1].step_time_ms"),
        ({"ranks": [{"rank": 2}, {"rank": 2}]}, "ranks[1].rank"),
        ({"ranks": [7]}, "ranks[0]"),
        ({"model_name": "only identity"}, ""),
    ],
)
def test_bad_training_payload_names_the_field(payload, field):
    with pytest.raises(SampleError) as info:
        parse_training(payload)
    assert info.value.field == field


def test_non_object_body_is_rejected():
    with pytest.raises(SampleError, match="JSON object"):
        parse_training([1, 2])


def test_rank_cap():
    payload = {"ranks": [{"rank": r, "step_time_ms": 1} for r in range(10)]}
    with pytest.raises(SampleError) as info:
        parse_training(payload, max_ranks=8)
    assert info.value.field == "ranks" and "at most 8" in info.value.message


def test_unknown_keys_and_nulls_are_ignored():
    sample = parse_training({"step_time_ms": 10, "my_metric": 3, "mfu": None})
    assert sample.step_time_ms == 10.0 and sample.mfu is None


def test_integral_float_accepted_for_integer_field():
    assert parse_training({"step_time_ms": 1, "global_step": 12.0}).global_step == 12


def test_gpus_sorted_unique_and_reasons_validated():
    gpus = parse_gpus([{"index": 1, "throttle_reasons": ["hw_thermal", "sw_thermal"]}, {"index": 0}])
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[1].throttle_reasons == ("sw_thermal", "hw_thermal")  # canonical order
    with pytest.raises(SampleError, match="unique"):
        parse_gpus([{"index": 0}, {"index": 0}])
    with pytest.raises(SampleError) as info:
        parse_gpus([{"index": 0, "throttle_reasons": ["overclocked"]}])
    assert info.value.field == "gpus[0].throttle_reasons[0]"
    with pytest.raises(SampleError) as info:
        parse_gpus([{"utilization_percent": 3}])
    assert info.value.field == "gpus[0].index"


def test_host_ranges():
    assert parse_host({"cpu_percent": 12.5, "cpu_count": 64}).cpu_count == 64
    with pytest.raises(SampleError) as info:
        parse_host({"cpu_percent": 140})
    assert info.value.field == "host.cpu_percent"
