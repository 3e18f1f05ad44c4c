"""TrainPulse's own instruments, as a node daemon exports them, back into that node's samples.

A node daemon exports the catalogue's measurements (``trainpulse.gpu.*`` with
``gpu.index``, ``trainpulse.host.*``, ``trainpulse.training.*``,
``trainpulse.rank.*`` with ``rank``, the XID totals) from the
``trainpulse_otel`` meter. They are read back by the same
:class:`~trainpulse_otel.telemetry.conversion.FrameAssembler` the daemon's own
reader uses, after each point is checked with the sample model's field rules,
so a node's GPUs arrive as they left. TrainPulse's *outputs* (health,
signals, goodput, the daemon's counters) and a relaying job daemon's view of
its other nodes (points naming another ``hostname``, ``node.*``) are not
inputs: they are counted as ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..samples import (
    GPU_RULES,
    HOST_RULES,
    RANK_PHASES,
    RANK_RULES,
    THROTTLE_REASONS,
    TRAINING_RULES,
    NodeReport,
    Rule,
    SampleError,
    check_value,
)
from ..samples.validation import COUNT, STR, XID_CODE
from ..telemetry.catalog import (
    ALL_INPUTS,
    GPU,
    GPU_THROTTLE,
    GPU_XID,
    HOST,
    NODE,
    NONFINITE,
    RANK,
    RANK_PHASE,
    TRAINING,
    TRAINING_INFO,
    TRAINING_INFO_ATTRIBUTES,
    MetricSpec,
)
from ..telemetry.conversion import NONFINITE_FIELDS, FrameAssembler
from .points import GAUGE, SUM, Attributes, Point
from .series import SeriesState
from .tally import Tally

#: The meter (instrumentation scope) TrainPulse's instruments come from.
TRAINPULSE_SCOPE = "trainpulse_otel"
SPECS: dict[str, MetricSpec] = {spec.suffix: spec for spec in ALL_INPUTS}
RULES: dict[str, Mapping[str, Rule]] = {GPU: GPU_RULES, HOST: HOST_RULES, TRAINING: TRAINING_RULES, RANK: RANK_RULES}
NONFINITE_TOKENS = ("nan", "inf", "-inf")
#: Scopes whose points, when they name a ``hostname``, are another node's (relayed by a job daemon).
NODE_LOCAL = (GPU, HOST)


class OwnInstruments:
    """The TrainPulse instruments of one resource (one node), gathered into its :class:`NodeReport`."""

    def __init__(self, hostname: str, namespace: str, series: SeriesState, tally: Tally) -> None:
        self.hostname = hostname
        self.prefix = namespace + "."
        self.series = series
        self.tally = tally
        self._newest: dict[tuple, tuple[int, MetricSpec, Point, float | int]] = {}

    def understands(self, point: Point) -> bool:
        """Whether ``point`` is one of TrainPulse's instruments (inputs and outputs alike)."""
        return point.scope == TRAINPULSE_SCOPE and point.metric.startswith(self.prefix)

    def add(self, point: Point) -> None:
        """Check ``point`` and keep it if it is the newest of its series; outputs and relayed views are ignored."""
        spec = SPECS.get(point.metric[len(self.prefix) :])
        if spec is None or spec.scope == NODE or point.kind not in (GAUGE, SUM) or point.value is None:
            self.tally.ignore(point.metric)
            return
        if spec.scope in NODE_LOCAL and "hostname" in point.attributes:
            self.tally.ignore(point.metric)
            return
        value = self.series.running_total(self.hostname, point, point.value) if point.kind == SUM else point.value
        try:
            checked_point(spec, point.attributes, value)
        except SampleError as exc:
            self.tally.reject(f"{point.metric}: {exc}")
            return
        self.tally.accept()
        series = point.series
        kept = self._newest.get(series)
        if kept is None or point.time_unix_nano >= kept[0] or point.delta:  # a delta's total is its newest
            self._newest[series] = (max(point.time_unix_nano, kept[0] if kept else 0), spec, point, value)

    def report(self) -> NodeReport | None:
        """The node's samples from the points kept; None when the request had none of them."""
        if not self._newest:
            return None
        assembler = FrameAssembler()
        for _, spec, point, value in self._newest.values():
            assembler.add(spec.suffix, point.attributes, value)
        frame = assembler.frame(0.0)
        return NodeReport(
            self.hostname,
            gpus=frame.gpus or None,
            host=frame.host,
            training=frame.training,
            xid_counts=frame.xid_counts or None,
        )


def checked_point(spec: MetricSpec, attributes: Attributes, value: float | int) -> None:
    """Raise SampleError naming the attribute or field of a point the frame could not take."""
    if spec is GPU_XID:
        attribute(attributes, "gpu.index", COUNT)
        attribute(attributes, "xid", XID_CODE)
        check_value("xid_counts.count", value, COUNT)
    elif spec is GPU_THROTTLE:
        attribute(attributes, "gpu.index", COUNT)
        one_of(attributes, "reason", THROTTLE_REASONS)
        check_value("throttle_reasons", value, Rule("int", 0, 1))
    elif spec is NONFINITE:
        one_of(attributes, "field", NONFINITE_FIELDS)
        one_of(attributes, "value", NONFINITE_TOKENS)
        attribute(attributes, "rank", COUNT, required=False)
    elif spec is TRAINING_INFO:
        for key in TRAINING_INFO_ATTRIBUTES.values():
            attribute(attributes, key, STR, required=False)
    elif spec is RANK_PHASE:
        attribute(attributes, "rank", COUNT)
        one_of(attributes, "phase", RANK_PHASES)
        attribute(attributes, "process.pid", COUNT, required=False)
    else:
        identity(spec.scope, attributes)
        scaled = value if spec.scale == 1.0 else value / spec.scale
        check_value(f"{spec.scope}.{spec.field}", scaled, RULES[spec.scope][spec.field])


def identity(scope: str, attributes: Attributes) -> None:
    """The attributes that say which GPU or rank a point is about."""
    if scope == GPU:
        attribute(attributes, "gpu.index", COUNT)
        attribute(attributes, "gpu.uuid", STR, required=False)
        attribute(attributes, "gpu.name", STR, required=False)
    elif scope == RANK:
        attribute(attributes, "rank", COUNT)
        attribute(attributes, "gpu.index", COUNT, required=False)
        attribute(attributes, "hostname", STR, required=False)


def attribute(attributes: Attributes, key: str, rule: Rule, required: bool = True) -> None:
    """Check the attribute ``key`` against ``rule`` (a bool is no number here)."""
    if key not in attributes:
        if required:
            raise SampleError(f"attribute {key}", "is required")
        return
    check_value(f"attribute {key}", attributes[key], rule)


def one_of(attributes: Attributes, key: str, known: tuple[str, ...]) -> None:
    value = attributes.get(key)
    if value not in known:
        raise SampleError(f"attribute {key}", f"must be one of {', '.join(known)}, got {value!r}")
