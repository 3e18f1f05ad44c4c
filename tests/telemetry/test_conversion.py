"""Replay's direct samples → frame read-back equals the reader's samples → points → frame, for any samples."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainpulse_otel.samples import (
    GPU_RULES,
    HOST_RULES,
    RANK_PHASES,
    RANK_RULES,
    THROTTLE_REASONS,
    TRAINING_RULES,
    GpuSample,
    HostSample,
    NodeSample,
    RankSample,
    Rule,
    TrainingSample,
    XidCount,
)
from trainpulse_otel.telemetry.assembly import FrameAssembler
from trainpulse_otel.telemetry.conversion import observe
from trainpulse_otel.telemetry.read_back import frame_from_samples

IDENTITY = {"index", "rank"}


def frame_via_points(ts, gpus, host, training, xid_counts=(), nodes=()):
    """What the in-process reader does with the points the instruments report."""
    assembler = FrameAssembler()
    assembler.add_observations(observe(gpus, host, training, xid_counts, nodes))
    return assembler.frame(ts)


def _value(rule: Rule) -> st.SearchStrategy:
    if rule.kind == "str":
        return st.text(max_size=12)
    lo = -1e12 if rule.lo is None else rule.lo
    hi = 1e12 if rule.hi is None else min(rule.hi, 1e15)
    if rule.kind == "int":
        return st.integers(int(lo), int(hi))
    whole = st.integers(int(lo) + (int(lo) < lo), int(hi))  # ints in float fields, as a monitor may hold them
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False) | whole


def _fields(rules: dict[str, Rule], skip: frozenset[str] = frozenset()) -> st.SearchStrategy[dict]:
    """Any subset of the rules' fields, each with a valid value."""
    return st.fixed_dictionaries(
        {}, optional={name: _value(rule) for name, rule in rules.items() if name not in IDENTITY | skip}
    )


def _gpus() -> st.SearchStrategy[tuple[GpuSample, ...]]:
    reasons = st.none() | st.lists(st.sampled_from(THROTTLE_REASONS), unique=True).map(tuple)
    # a sample's new XID codes are not in the frame (its totals are): () and codes alike read back as None
    xids = st.none() | st.lists(st.integers(1, 200), max_size=2).map(tuple)
    one = st.builds(lambda fields, throttle, codes: (fields, throttle, codes), _fields(GPU_RULES), reasons, xids)
    return st.lists(one, max_size=4).flatmap(
        lambda items: st.permutations(range(len(items))).map(
            lambda order: tuple(
                GpuSample(index=i, throttle_reasons=t, xid_errors=x, **f)
                for i, (f, t, x) in zip(order, items, strict=True)
            )
        )
    )


def _training() -> st.SearchStrategy[TrainingSample]:
    rank = st.builds(
        lambda r, f, phase, pid: RankSample(rank=r, phase=phase, pid=pid, **f),
        st.integers(0, 64),
        _fields(RANK_RULES),
        st.none() | st.sampled_from(RANK_PHASES),
        st.none() | st.integers(0, 2**22),
    )
    ranks = st.lists(rank, max_size=5, unique_by=lambda r: r.rank).map(tuple)
    return st.builds(lambda f, rs: TrainingSample(**f, ranks=rs), _fields(TRAINING_RULES), ranks)


NODE_NAMES = st.none() | st.sampled_from(("node-a", "node-b"))


def _xid_counts() -> st.SearchStrategy[tuple[XidCount, ...]]:
    key = st.tuples(NODE_NAMES, st.integers(0, 7), st.integers(1, 200))
    return st.dictionaries(key, st.integers(1, 10**6), max_size=5).map(
        lambda d: tuple(XidCount(g, x, n, node) for (node, g, x), n in d.items())
    )


def _on_nodes(gpus: tuple[GpuSample, ...]) -> st.SearchStrategy[tuple[GpuSample, ...]]:
    """The GPUs spread over this node and two others (a job daemon's view): (node, index) stays unique."""
    return st.lists(NODE_NAMES, min_size=len(gpus), max_size=len(gpus)).map(
        lambda names: tuple(dataclasses.replace(g, node=n) for g, n in zip(gpus, names, strict=True))
    )


def _nodes() -> st.SearchStrategy[tuple[NodeSample, ...]]:
    host = st.none() | _fields(HOST_RULES).map(lambda f: HostSample(**f))
    interval = st.none() | st.floats(0.1, 600.0)
    node = st.builds(NodeSample, st.sampled_from(("node-a", "node-b", "node-c")), st.floats(0, 2e9), interval, host)
    return st.lists(node, max_size=3, unique_by=lambda n: n.hostname).map(tuple)


#: Any samples a frame is made of: GPUs on this node and others, the host, a report, XID totals, other nodes.
SAMPLES = {
    "gpus": _gpus().flatmap(_on_nodes),
    "host": st.none() | _fields(HOST_RULES).map(lambda f: HostSample(**f)),
    "training": st.none() | _training(),
    "xids": _xid_counts(),
    "nodes": _nodes(),
}


@settings(max_examples=300, deadline=None)
@given(**SAMPLES)
def test_direct_read_back_equals_the_readers_conversion(gpus, host, training, xids, nodes):
    direct = frame_from_samples(5.0, gpus, host, training, xids, nodes)
    assert direct == frame_via_points(5.0, gpus, host, training, xids, nodes)
    assert list(direct.xid_counts) == sorted(xids, key=lambda x: x.sort_key)
    assert [n.hostname for n in direct.nodes] == sorted(n.hostname for n in nodes)


def _planned(node, observations):
    """``observations`` as a layout planned ahead (:meth:`FrameAssembler.plan`), and their values in its order."""
    metrics, values = [], []
    for suffix, points in observations.items():
        kinds = {type(v) for v, _ in points}
        metrics.append((suffix, [attrs for _, attrs in points], kinds.pop() if len(kinds) == 1 else None))
        values.extend(v for v, _ in points)
    return FrameAssembler.plan(node, metrics), values


@settings(max_examples=300, deadline=None)
@given(**SAMPLES, node=NODE_NAMES)
def test_a_planned_layout_assembles_its_values_into_the_frame_the_points_make(gpus, host, training, xids, nodes, node):
    observations = observe(gpus, host, training, xids, nodes)
    assembler = FrameAssembler(node)
    assembler.add_observations(observations)
    plan, values = _planned(node, observations)
    assert plan.frame(values, 5.0) == assembler.frame(5.0)
    assert plan.frame(values, 5.0) == plan.frame(values, 5.0)  # the plan's base is copied, never filled


def test_a_planned_layout_takes_new_values_and_refuses_a_count_that_is_not_its_own():
    gpus = (GpuSample(index=0, temperature_celsius=70.0, throttle_reasons=()), GpuSample(index=1, power_watts=300.0))
    plan, values = _planned("node-a", observe(gpus, None, None, (XidCount(0, 79, 1, "node-a"),)))
    hotter = [80.0 if v == 70.0 else 2 if v == 1 else v for v in values]
    hotter[values.index(0)] = 1  # the first throttle reason (catalogue order) is on
    frame = plan.frame(hotter, 1.0)
    assert frame.gpus[0].temperature_celsius == 80.0 and frame.gpus[0].throttle_reasons == THROTTLE_REASONS[:1]
    assert frame.xid_counts == (XidCount(0, 79, 2, "node-a"),)
    assert plan.frame(values, 1.0).gpus[0].temperature_celsius == 70.0  # the earlier values, as they were
    with pytest.raises(ValueError, match="a plan of 9 points was handed 8 values"):
        plan.frame(values[:-1])


@st.composite
def _uniform_ranks(draw: st.DrawFn) -> TrainingSample:
    """A report whose ranks all carry the same fields (the usual report, handed on as it is), of any kind."""
    names = draw(st.sets(st.sampled_from(sorted(set(RANK_RULES) - IDENTITY - {"phase", "pid"}))))
    phase = draw(st.sampled_from(("none", "all", "some")))
    pids = draw(st.booleans())
    ranks = []
    for r in range(draw(st.integers(1, 6))):
        fields = {name: draw(_value(RANK_RULES[name])) for name in names}
        has_phase = phase == "all" or (phase == "some" and r % 2 == 0)
        ranks.append(
            RankSample(rank=r, phase="compute" if has_phase else None, pid=1000 + r if pids else None, **fields)
        )
    return TrainingSample(ranks=tuple(reversed(ranks)))


def _types(frame):
    return [tuple(type(getattr(r, f.name)) for f in dataclasses.fields(r)) for r in frame.training.ranks]


@settings(max_examples=300, deadline=None)
@given(training=_uniform_ranks())
def test_a_reports_ranks_read_back_as_the_reader_restores_them_to_their_types(training):
    direct, via_points = frame_from_samples(5.0, (), None, training), frame_via_points(5.0, (), None, training)
    assert direct == via_points
    assert _types(direct) == _types(via_points)  # an int in a float field comes back a float, not as it went


def test_what_has_no_point_is_not_in_the_frame():
    gpus = (GpuSample(index=0, name="idle, unmeasured"), GpuSample(index=1, utilization_percent=50.0))
    training = TrainingSample(
        model_name="m", ranks=(RankSample(rank=0, gpu_index=0), RankSample(rank=1, gpu_index=1, step_time_ms=900.0))
    )
    frame = frame_from_samples(1.0, gpus, HostSample(), training)
    assert [g.index for g in frame.gpus] == [1]
    assert frame.host is None
    assert [r.rank for r in frame.training.ranks] == [1] and frame.training.model_name == "m"


def test_clocks_come_back_as_the_reader_rounds_them():
    gpu = GpuSample(index=0, sm_clock_mhz=1410.1234567891, throttle_reasons=("sw_thermal", "hw_slowdown"))
    read = frame_from_samples(1.0, (gpu,)).gpus[0]
    assert read.sm_clock_mhz == 1410.123457
    assert read.throttle_reasons == tuple(r for r in THROTTLE_REASONS if r in {"sw_thermal", "hw_slowdown"})
    assert dataclasses.replace(read, sm_clock_mhz=gpu.sm_clock_mhz, throttle_reasons=gpu.throttle_reasons) == gpu


def test_a_gpu_as_a_trace_line_holds_it_reads_back_as_the_reader_builds_it():
    """Whole-MHz clocks, reasons in catalogue order and an empty XID list: the usual sample, passed on as is
    but for its XID codes (the frame carries totals)."""
    gpu = GpuSample(
        index=3,
        uuid="GPU-3",
        name="NVIDIA H100 80GB HBM3",
        utilization_percent=95.0,
        memory_used_bytes=65 << 30,
        memory_total_bytes=80 << 30,
        sm_clock_mhz=1965.0,
        max_sm_clock_mhz=1980.0,
        throttle_reasons=("sw_power_cap", "sw_thermal"),
        ecc_corrected_errors=0,
        xid_errors=(),
        node="node-a",
    )
    read = frame_from_samples(1.0, (gpu,)).gpus[0]
    assert read == frame_via_points(1.0, (gpu,), None, None).gpus[0]
    assert read == dataclasses.replace(gpu, xid_errors=None)
    out_of_order = dataclasses.replace(gpu, throttle_reasons=("sw_thermal", "sw_power_cap"), xid_errors=None)
    assert frame_from_samples(1.0, (out_of_order,)).gpus[0].throttle_reasons == ("sw_power_cap", "sw_thermal")
