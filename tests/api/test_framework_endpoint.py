"""POST /v1/framework over real HTTP: every adapter, log text, context, and every error path."""

import json
import logging
from pathlib import Path

import pytest

from trainpulse_otel.adapters import Adapter
from trainpulse_otel.api import create_app
from trainpulse_otel.runtime.plugins import load_adapters

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
JSON = {"Content-Type": "application/json"}
TEXT = {"Content-Type": "text/plain; charset=utf-8"}
KNOWN = ["deepspeed", "generic", "huggingface", "lightning", "megatron", "pytorch", "torchtitan"]

# (adapter, payload, fields the ingested sample must then hold)
JSON_CASES = [
    (
        "generic",
        {"model": "llama-3-8b", "train_tokens_per_second": 9.1e5, "step": 7},
        {"model_name": "llama-3-8b", "tokens_per_sec": 9.1e5, "global_step": 7},
    ),
    (
        "pytorch",
        {"time": 0.25, "data": 0.05, "lr": 0.1, "loss": 3.3, "step": 10},
        {"step_time_ms": 250.0, "data_wait_ms": 50.0, "learning_rate": 0.1, "framework": "pytorch"},
    ),
    (
        "huggingface",
        {"logs": {"loss": 2.14, "grad_norm": 0.84, "learning_rate": 1.98e-05, "epoch": 0.12}, "step": 120},
        {"loss": 2.14, "grad_norm": 0.84, "global_step": 120, "framework": "huggingface"},
    ),
    (
        "deepspeed",
        {
            "Train/Samples/train_loss": 2.31,
            "Train/Samples/lr": 3e-5,
            "global_samples": 5120,
            "train_batch_size": 256,
            "Train/Samples/elapsed_time_ms_forward": 400.0,
            "Train/Samples/elapsed_time_ms_backward": 800.0,
            "Train/Samples/elapsed_time_ms_step": 60.0,
        },
        {"global_step": 20, "step_time_ms": 1260.0, "loss": 2.31},
    ),
    (
        "megatron",
        {"iteration-time": 3.9542, "throughput": 388.7, "lm loss": 7.41, "batch-size": 512, "step": 100},
        {"step_time_ms": 3954.2, "tflops": 388.7, "global_batch_size": 512, "global_step": 100},
    ),
    (
        "lightning",
        {
            "train/device/mfu": 0.41,
            "train/device/batches_per_sec": 2.0,
            "train/device/samples_per_sec": 16.0,
            "train/samples_per_sec": 128.0,
            "step": 5,
        },
        {"mfu": 0.41, "step_time_ms": 500.0, "world_size": 8, "samples_per_sec": 128.0},
    ),
    (
        "torchtitan",
        {"mfu(%)": 39.89, "throughput(tps)": 6812.0, "time_metrics/end_to_end(s)": 1.2, "step": 10},
        {"mfu": 0.3989, "step_time_ms": 1200.0, "global_step": 10},
    ),
]


@pytest.mark.parametrize(("name", "payload", "expected"), JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_each_adapter_ingests_its_framework_dict(served, name, payload, expected):
    status, _, raw = served.send("POST", f"/v1/framework?name={name}", json.dumps(payload).encode(), JSON)
    answer = json.loads(raw)
    assert status == 202, answer
    assert answer["status"] == "accepted" and answer["adapter"] == name
    assert set(expected) <= set(answer["fields"])
    for field, value in expected.items():
        assert answer["sample"][field] == pytest.approx(value)
    training = served.engine.latest.current().training
    assert getattr(training, next(iter(expected))) == pytest.approx(next(iter(expected.values())))


def test_the_answer_accounts_for_every_key(served):
    payload = {"mfu(%)": 40.0, "throughput(tps)": 7000.0, "memory/max_active(GiB)": 58.1, "step": 3}
    _, _, raw = served.send("POST", "/v1/framework?name=torchtitan", json.dumps(payload).encode(), JSON)
    answer = json.loads(raw)
    assert answer["mapped"]["mfu"] == "mfu(%)"
    assert answer["ignored"] == ["memory/max_active(GiB)"]
    assert any("world_size" in note for note in answer["notes"])  # tps is per device: not scaled without it


@pytest.mark.parametrize(
    ("name", "fixture", "query", "expected"),
    [
        (
            "megatron",
            "megatron_core_minmax.log",
            "&world_size=64&model_name=llama3-8b",
            {
                "global_step": 200,
                "step_time_ms": 3961.7,
                "data_wait_ms": 14.1,
                "model_name": "llama3-8b",
                "world_size": 64,
            },
        ),
        ("megatron", "megatron_all_ranks.log", "", {"global_step": 50, "all_reduce_wait_ms": 349.0}),
        (
            "deepspeed",
            "deepspeed_0.16_breakdown.log",
            "&train_batch_size=256",
            {"global_step": 20, "all_reduce_wait_ms": 130.16, "global_batch_size": 256},
        ),
        ("deepspeed", "deepspeed_pipeline.log", "", {"global_step": 20, "loss": 7.2345}),
        ("torchtitan", "torchtitan_console.log", "&world_size=8", {"global_step": 10, "tokens_per_sec": 6812 * 8}),
    ],
)
def test_log_text_is_accepted_as_text_plain(served, name, fixture, query, expected):
    body = (FRAMEWORKS / fixture).read_bytes()
    status, _, raw = served.send("POST", f"/v1/framework?name={name}{query}", body, TEXT)
    answer = json.loads(raw)
    assert status == 202, answer
    for field, value in expected.items():
        assert answer["sample"][field] == (pytest.approx(value) if isinstance(value, float) else value)


def test_per_rank_times_from_a_megatron_log_reach_the_snapshot(served):
    body = (FRAMEWORKS / "megatron_all_ranks.log").read_bytes()
    assert served.send("POST", "/v1/framework?name=megatron", body, TEXT)[0] == 202
    served.engine.tick()
    ranks = served.get_json("/v1/snapshot")[1]["training"]["ranks"]
    assert [r["rank"] for r in ranks] == list(range(8))
    assert max(ranks, key=lambda r: r["step_time_ms"])["rank"] == 5


@pytest.mark.parametrize("query", ["", "?name=", "?other=1"])
def test_missing_name_is_400_listing_the_known_adapters(served, query):
    status, _, raw = served.send("POST", f"/v1/framework{query}", b'{"step_time_ms": 1}', JSON)
    answer = json.loads(raw)
    assert status == 400 and answer["field"] == "name" and answer["known"] == KNOWN


def test_unknown_name_is_400_listing_the_known_adapters(served):
    status, _, raw = served.send("POST", "/v1/framework?name=jax", b'{"step_time_ms": 1}', JSON)
    answer = json.loads(raw)
    assert status == 400 and answer["field"] == "name" and answer["known"] == KNOWN
    assert "'jax'" in answer["error"] and "megatron" in answer["error"]


def test_log_text_to_a_dict_only_adapter_is_415(served):
    status, _, raw = served.send("POST", "/v1/framework?name=huggingface", b"{'loss': 2.0}", TEXT)
    answer = json.loads(raw)
    assert status == 415 and answer["field"] == "Content-Type"
    hint = answer["error"].split(";", 1)[1]
    assert "application/json" in hint and "text/plain" not in hint  # huggingface reads no log text


def test_text_hint_is_offered_by_text_adapters(served):
    status, _, raw = served.send("POST", "/v1/framework?name=megatron", b"x", {"Content-Type": "application/x-ndjson"})
    assert status == 415 and "text/plain" in json.loads(raw)["error"]


@pytest.mark.parametrize(
    ("name", "body", "headers", "field", "fragment"),
    [
        ("megatron", b"nothing useful here\n", TEXT, None, "no complete Megatron iteration line"),
        ("deepspeed", b"\xff\xfe not utf-8", TEXT, None, "not valid UTF-8"),
        ("generic", b"[1, 2]", JSON, None, "JSON object"),
        ("generic", b'{"foo": 1, "bar": 2}', JSON, None, "ignored keys: foo, bar"),
        ("huggingface", b'{"logs": {"eval_loss": 2.2}, "step": 5}', JSON, None, "no measurement"),
        ("torchtitan", b'{"mfu(%)": 140.0}', JSON, "mfu(%)", "<= 1"),
        ("lightning", b'{"train/device/batches_per_sec": "fast"}', JSON, "train/device/batches_per_sec", "number"),
        ("deepspeed", b'{"events": "none"}', JSON, "events", "array"),
        ("megatron", b'{"iteration-time": 1e400}', JSON, "iteration-time", "finite"),
        ("generic", b'{"step_time_ms": NaN}', JSON, "step_time_ms", "finite"),
    ],
)
def test_framework_errors_are_json_400_naming_the_problem(served, name, body, headers, field, fragment):
    status, _, raw = served.send("POST", f"/v1/framework?name={name}", body, headers)
    answer = json.loads(raw)
    assert status == 400, answer
    assert answer["field"] == field and fragment in answer["error"]
    assert served.engine.latest.current().training is None


def test_query_context_is_typed_and_validated(served):
    status, _, raw = served.send("POST", "/v1/framework?name=generic&world_size=abc", b'{"step_time_ms": 1}', JSON)
    assert status == 400 and json.loads(raw)["field"] == "world_size"
    status, _, raw = served.send(
        "POST", "/v1/framework?name=generic&world_size=" + "9" * 5000, b'{"step_time_ms": 1}', JSON
    )
    assert status == 400 and json.loads(raw)["field"] == "world_size"
    status, _, raw = served.send(
        "POST", "/v1/framework?name=generic&world_size=16&hostname=node-7", b'{"step_time_ms": 1}', JSON
    )
    assert status == 202 and json.loads(raw)["sample"]["world_size"] == 16


def test_a_plugin_that_crashes_or_returns_junk_is_a_400_and_logged(serve_app, caplog):
    def crash(payload):
        return 1 / 0

    adapters = {
        **load_adapters(autoload=False),
        "crashy": Adapter("crashy", crash),
        "junk": Adapter("junk", lambda payload: 42),
        "textcrash": Adapter("textcrash", lambda p: {}, lambda text, ctx: text.missing),
    }
    served = serve_app(lambda engine: create_app(engine, adapters))
    with caplog.at_level(logging.ERROR, logger="trainpulse_otel.api.app"):
        for name, body, headers in (("crashy", b"{}", JSON), ("junk", b"{}", JSON), ("textcrash", b"x", TEXT)):
            status, _, raw = served.send("POST", f"/v1/framework?name={name}", body, headers)
            answer = json.loads(raw)
            assert status == 400 and f"'{name}'" in answer["error"], answer
    assert "ZeroDivisionError" in caplog.text and "returned int" in caplog.text


def test_log_text_with_garbled_numbers_is_read_for_what_it_says_never_a_500(served):
    garbled = b"[Rank 0] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ..., reducing to ...\n"
    status, _, raw = served.send("POST", "/v1/framework?name=deepspeed", garbled, TEXT)
    answer = json.loads(raw)
    assert status == 202 and answer["sample"]["skipped_steps"] == 1 and "loss_scale" not in answer["sample"]
    status, _, raw = served.send("POST", "/v1/framework?name=deepspeed", b"1/2000, SamplesPerSec=...\n", TEXT)
    assert status == 400 and "no DeepSpeed throughput" in json.loads(raw)["error"]
