"""Validation's fast path (a plain dict, samples/builder.py) and its checked path (any other mapping) agree:
the same sample for what both accept, the same error for what they refuse."""

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainpulse_otel.samples import (
    GPU_RULES,
    HOST_RULES,
    RANK_RULES,
    TRAINING_RULES,
    GpuSample,
    HostSample,
    Rule,
    SampleError,
    XidCount,
    parse_gpu,
    parse_host,
    parse_rank,
    parse_training,
)
from trainpulse_otel.samples.builder import SampleBuilder, field_maker, field_replacer

# Values a field may meet: well formed, an int where a float goes, bools, non-finite, out of range, wrong types.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1),
    st.text(max_size=3),
    st.just("x" * 300),
    st.just([]),
    st.just({}),
)


def fields_of(rules: dict[str, Any], extra: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from([*rules, *extra, "unknown"]), VALUES, max_size=len(rules) + 3).map(
        lambda d: {**extra, **d}
    )


def outcome(parse: Any, data: Any) -> Any:
    try:
        return parse(data)
    except SampleError as exc:
        return ("error", exc.field, exc.message)


@settings(max_examples=300, deadline=None)
@given(fields_of(GPU_RULES, {"index": 0}))
def test_gpu_fast_path_is_the_checked_path(data: dict[str, Any]) -> None:
    assert outcome(parse_gpu, data) == outcome(parse_gpu, MappingProxyType(data))


@settings(max_examples=300, deadline=None)
@given(fields_of(HOST_RULES, {}))
def test_host_fast_path_is_the_checked_path(data: dict[str, Any]) -> None:
    assert outcome(parse_host, data) == outcome(parse_host, MappingProxyType(data))


@settings(max_examples=300, deadline=None)
@given(fields_of(RANK_RULES, {"rank": 3, "phase": "compute", "pid": 12}))
def test_rank_fast_path_is_the_checked_path(data: dict[str, Any]) -> None:
    assert outcome(lambda d: parse_rank(d, "ranks[0]"), data) == outcome(
        lambda d: parse_rank(d, "ranks[0]"), MappingProxyType(data)
    )


@settings(max_examples=300, deadline=None)
@given(fields_of(TRAINING_RULES, {"ranks": [{"rank": 1, "step_time_ms": 10.0}, {"rank": 0}]}))
def test_training_fast_path_is_the_checked_path(data: dict[str, Any]) -> None:
    assert outcome(parse_training, data) == outcome(parse_training, MappingProxyType(data))


def test_a_well_formed_payload_takes_the_fast_path_to_an_equal_sample() -> None:
    data = {"index": 2, "uuid": "GPU-1", "utilization_percent": 97.0, "memory_used_bytes": 5, "throttle_reasons": []}
    fast, checked = parse_gpu(data), parse_gpu(MappingProxyType(data))
    assert fast == checked
    assert hash(fast) == hash(checked)
    assert fast.throttle_reasons == () and fast.node is None and fast.xid_errors is None


@dataclass(frozen=True, slots=True)
class _Checked:
    value: float | None = None

    def __post_init__(self) -> None:
        pass


def test_a_class_with_a_post_init_is_refused() -> None:
    """Builders, makers and replacers never call ``__init__``: a class that needs its ``__post_init__`` must not
    be made by them."""
    with pytest.raises(TypeError, match="__post_init__"):
        SampleBuilder(_Checked, {"value": Rule("float")})
    with pytest.raises(TypeError, match="__post_init__"):
        field_maker(_Checked)
    with pytest.raises(TypeError, match="__post_init__"):
        field_replacer(_Checked, "value")


GPU_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "uuid": st.text(max_size=4),
        "temperature_celsius": st.floats(0, 120),
        "ecc_corrected_errors": st.integers(0, 9),
    },
)


@settings(max_examples=100, deadline=None)
@given(fields=GPU_FIELDS, index=st.integers(0, 7), node=st.none() | st.just("node-a"))
def test_a_field_maker_makes_what_the_classes_init_makes(fields: dict[str, Any], index: int, node: str | None) -> None:
    made = field_maker(GpuSample, ("index", "node"))(fields, index, node)
    assert made == GpuSample(index=index, node=node, **fields)
    assert hash(made) == hash(GpuSample(index=index, node=node, **fields))
    assert field_maker(HostSample)({}) == HostSample()


def test_a_field_maker_is_given_every_field_without_a_default() -> None:
    with pytest.raises(TypeError, match=r"GpuSample\.index has no default"):
        field_maker(GpuSample)
    with pytest.raises(TypeError, match="GpuSample has no field 'gpu'"):
        field_maker(GpuSample, ("index", "gpu"))


@settings(max_examples=100, deadline=None)
@given(fields=GPU_FIELDS, index=st.integers(0, 7), node=st.none() | st.just("node-a"))
def test_a_field_replacer_copies_as_dataclasses_replace_does(
    fields: dict[str, Any], index: int, node: str | None
) -> None:
    gpu = GpuSample(index=index, **fields)
    assert field_replacer(GpuSample, "node")(gpu, node) == replace(gpu, node=node)
    both = field_replacer(GpuSample, "node", "uuid")(gpu, node, "GPU-x")
    assert both == replace(gpu, node=node, uuid="GPU-x") and hash(both) == hash(replace(gpu, node=node, uuid="GPU-x"))
    all_but_one = field_replacer(XidCount, "count", "xid", "gpu_index")  # one field read from the sample
    assert all_but_one(XidCount(0, 43, 1, node="n"), 2, 79, 3) == XidCount(3, 79, 2, node="n")


def test_a_field_replacer_names_distinct_fields() -> None:
    for names in (("gpu",), (), ("node", "node")):
        with pytest.raises(TypeError, match="distinct fields"):
            field_replacer(GpuSample, *names)
