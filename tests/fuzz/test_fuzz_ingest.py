"""Property-based fuzzing of the ingest endpoints and the trace reader.

Whatever a client sends — random bytes, invalid UTF-8, wrong types, NaN and
infinities, huge and negative numbers, deep nesting, 100,000-entry rank lists,
wrong content types — the answer is a 2xx or a 4xx naming the problem, never a
5xx; the daemon stays up; and a valid payload afterwards is diagnosed normally.
The requests go over real HTTP to a waitress-served daemon.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainpulse_otel.collect.trace import TraceError, read_trace
from trainpulse_otel.samples import RANK_RULES, TRAINING_RULES

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e308, -1e-308, 2**53, 2**53 + 1]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=40))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
rank_entry = st.dictionaries(st.sampled_from(sorted(RANK_RULES)), values, max_size=6)
payload = st.dictionaries(
    st.one_of(st.sampled_from([*sorted(TRAINING_RULES), "ranks"]), st.text(max_size=10)),
    st.one_of(values, st.lists(rank_entry, max_size=5)),
    max_size=12,
)


def _encode(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def _answer_is_clean(status: int, body: bytes) -> None:
    assert status < 500, body
    if status >= 400:
        answer = json.loads(body)
        assert answer["error"] and "field" in answer


def _still_diagnoses(served) -> None:
    """A valid payload afterwards is accepted and reaches the frame intact."""
    good = {"step_time_ms": 1234.5, "tokens_per_sec": 1e5, "ranks": [{"rank": 0, "gpu_index": 0, "step_time_ms": 1200}]}
    status, _, _ = served.request(
        "POST", "/v1/training", json.dumps(good).encode(), {"Content-Type": "application/json"}
    )
    assert status == 202
    served.engine.tick()
    training = served.engine.frame.training
    assert training.step_time_ms == 1234.5 and training.ranks[0].step_time_ms == 1200.0
    status, snapshot = served.get_json("/v1/snapshot")
    assert status == 200 and snapshot["diagnosis"]["health"]["score"] >= 0
    for value in (training.step_time_ms, training.tokens_per_sec):
        assert math.isfinite(value)


@FUZZ
@given(body=payload)
def test_training_payloads(served, body):
    status, _, answer = served.request("POST", "/v1/training", _encode(body), {"Content-Type": "application/json"})
    _answer_is_clean(status, answer)


@FUZZ
@given(
    raw=st.binary(max_size=300),
    content_type=st.sampled_from(
        ["application/json", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", ""]
    ),
)
def test_random_bytes_and_content_types(served, raw, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    for path in ("/v1/training", "/v1/framework?name=megatron"):
        status, _, answer = served.request("POST", path, raw, headers)
        _answer_is_clean(status, answer)


@FUZZ
@given(
    name=st.text(max_size=12)
    | st.sampled_from(["generic", "pytorch", "deepspeed", "megatron", "huggingface", "lightning", "torchtitan"]),
    body=st.dictionaries(st.text(max_size=30), values, max_size=10),
)
def test_framework_payloads(served, name, body):
    from urllib.parse import quote

    status, _, answer = served.request(
        "POST", f"/v1/framework?name={quote(name)}", _encode(body), {"Content-Type": "application/json"}
    )
    _answer_is_clean(status, answer)


def test_deep_nesting_huge_rank_lists_and_then_a_valid_payload(served):
    deep = b"[" * 100_000 + b"]" * 100_000
    huge_ranks = _encode({"ranks": [{"rank": i, "step_time_ms": 1.0} for i in range(100_000)]})
    for body in (deep, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, huge_ranks):
        status, _, answer = served.request("POST", "/v1/training", body, {"Content-Type": "application/json"})
        assert 400 <= status < 500, answer
    _still_diagnoses(served)


@FUZZ
@given(body=payload)
def test_the_window_is_never_poisoned(served, body):
    served.request("POST", "/v1/training", _encode(body), {"Content-Type": "application/json"})
    served.engine.tick()  # whatever was accepted must tick cleanly
    frame = served.engine.frame
    if frame.training is not None:
        for name, rule in TRAINING_RULES.items():
            value = getattr(frame.training, name)
            assert not isinstance(value, float) or rule.nonfinite_ok or math.isfinite(value)


NUMBER_FIELDS = sorted(name for name, rule in TRAINING_RULES.items() if rule.kind != "str")


@FUZZ
@given(
    field=st.sampled_from(NUMBER_FIELDS),
    bad=st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    step_ms=st.floats(min_value=0, max_value=1e6),
)
def test_a_non_finite_number_is_data_in_the_loss_fields_and_a_400_naming_the_field_elsewhere(
    served, field, bad, step_ms
):
    body = {"step_time_ms": step_ms, field: bad} if field != "step_time_ms" else {"tokens_per_sec": 1.0, field: bad}
    status, _, answer = served.request("POST", "/v1/training", _encode(body), {"Content-Type": "application/json"})
    if TRAINING_RULES[field].nonfinite_ok:
        assert status == 202, answer
        landed = served.engine.latest.current().training
        assert math.isnan(getattr(landed, field)) if bad != bad else getattr(landed, field) == bad
        assert landed.step_time_ms == step_ms  # the report's other fields land
    else:
        assert status == 400 and json.loads(answer)["field"] == field, answer


def test_after_the_fuzzing_the_daemon_still_diagnoses(served):
    for body in (b"\xff\xfe", b"[]", b'{"mfu": 7}', b"{" * 1000):
        served.request("POST", "/v1/training", body, {"Content-Type": "application/json"})
    _still_diagnoses(served)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.builds(
                lambda ts, kind, v: _encode({"ts": ts, kind: v}),
                numbers,
                st.sampled_from(["gpus", "host", "training", "other"]),
                values,
            ),
        ),
        max_size=20,
    )
)
def test_trace_reader_reports_and_skips_every_bad_line(lines):
    errors: list[TraceError] = []
    records = list(read_trace(lines, errors))
    assert len(records) + len(errors) <= len(lines)
    assert all(1 <= e.lineno <= len(lines) for e in errors)
    assert all(math.isfinite(r.ts) for r in records)
