"""Megatron-LM's native OpenTelemetry metrics (``megatron.training.*``) into a job-level training report.

Megatron (``MEGATRON_OTEL_ENABLED=1`` or ``--otel-enabled``) records, on its
export rank, every ``--log-interval``: ``step_duration_ms`` (a Histogram in
ms), the Gauges ``loss``, ``grad_norm``, ``learning_rate``,
``tokens_per_sec``, ``throughput_tflops`` (TFLOP/s per GPU) and
``memory_allocated_gb``, and the Counter ``skipped_iters``; its resource
carries the job's shape (``dl.tensor_parallel.size``, ``dl.batch_size``,
``dl.sequence_length``, ``megatron.precision``, …). The names map to contract
fields through the ``megatron`` adapter's own table, and the adapter builds
the report (it also derives samples/s from the global batch and the step
time), so a Megatron job reads the same through OTLP as through its logs.

The step time is the interval's mean: a delta histogram's ``sum / count``, a
cumulative one's difference from the previous export. ``skipped_iters``
becomes ``skipped_steps`` since the previous export. ``memory_allocated_gb``
has no contract field; it is counted as ignored.
"""

from __future__ import annotations

from typing import Any

from ..adapters.megatron import ADAPTER, SCALAR_RULES
from ..samples import TRAINING_RULES, SampleError, TrainingSample, check_value
from .points import GAUGE, HISTOGRAM, SUM, Attributes, Point
from .series import SeriesState
from .tally import Tally

PREFIX = "megatron.training."
STEP_DURATION = PREFIX + "step_duration_ms"
SKIPPED_ITERS = PREFIX + "skipped_iters"
#: Megatron metric -> contract field, as the megatron adapter maps it.
FIELDS: dict[str, str] = {rule.key: rule.field for rule in SCALAR_RULES if rule.key.startswith(PREFIX)}
#: What each metric must be to be read: the step duration a histogram, skipped iterations a sum, the rest gauges.
KINDS: dict[str, str] = {name: {STEP_DURATION: HISTOGRAM, SKIPPED_ITERS: SUM}.get(name, GAUGE) for name in FIELDS}
#: Resource attributes Megatron sets (its observability guide) -> (the key the megatron adapter reads, the contract
#: field it feeds); the adapter derives samples/s from the batch and the step time. ``model`` is TrainPulse's own.
RESOURCE_KEYS: dict[str, tuple[str, str]] = {
    "dl.tensor_parallel.size": ("tensor_parallel_size", "tensor_parallel_size"),
    "dl.pipeline_parallel.size": ("pipeline_parallel_size", "pipeline_parallel_size"),
    "dl.data_parallel.size": ("data_parallel_size", "data_parallel_size"),
    "dl.batch_size": ("batch-size", "global_batch_size"),
    "dl.sequence_length": ("seq_length", "max_seq_len"),
    "megatron.micro_batch_size": ("micro_batch_size", "micro_batch_size"),
    "megatron.precision": ("precision", "precision"),
    "model": ("model_name", "model_name"),
}


class MegatronMetrics:
    """The ``megatron.training.*`` points of one resource, gathered into one training report."""

    def __init__(self, hostname: str, resource: Attributes, series: SeriesState, tally: Tally) -> None:
        self.hostname = hostname
        self.resource = resource
        self.series = series
        self.tally = tally
        self._gauges: dict[str, tuple[int, float]] = {}
        self._sums: dict[str, tuple[float, int]] = {}
        self._points: dict[str, int] = {}  # points taken, by metric

    @staticmethod
    def understands(metric: str) -> bool:
        return metric.startswith(PREFIX)

    def add(self, point: Point) -> None:
        """Take one point: an interval's histogram or counter adds up; a gauge keeps its newest value."""
        field = FIELDS.get(point.metric)
        if field is None or point.kind != KINDS[point.metric]:
            self.tally.ignore(point.metric)
            return
        if point.kind == HISTOGRAM:
            if point.sum is None:
                self.tally.ignore(point.metric)
                return
            total, count = self.series.interval(self.hostname, point.series, point.delta, point.sum, point.count)
        elif point.value is None:
            self.tally.ignore(point.metric)
            return
        else:
            total, count = (
                self.series.interval(self.hostname, point.series, point.delta, point.value)
                if point.kind == SUM
                else (point.value, 0)
            )
        if point.kind == GAUGE:  # each value judged as it comes: a bad one leaves the last good one standing
            if not self._checked(point.metric, total):
                return
            newest = self._gauges.get(point.metric)
            if newest is None or point.time_unix_nano >= newest[0]:
                self._gauges[point.metric] = (point.time_unix_nano, total)
        else:  # an interval's parts add up, and the sum is judged (see _measurements)
            known = self._sums.get(point.metric, (0.0, 0))
            self._sums[point.metric] = (known[0] + total, known[1] + count)
        self._points[point.metric] = self._points.get(point.metric, 0) + 1

    def _checked(self, metric: str, value: float, points: int = 1) -> bool:
        """Whether ``value`` fits the rule of the field ``metric`` feeds; if not, its points are rejected by name."""
        field = FIELDS[metric]
        try:
            check_value(f"training.{field}", value, TRAINING_RULES[field])
        except SampleError as exc:
            self.tally.reject(f"{metric}: {exc}", points)
            return False
        return True

    def sample(self) -> TrainingSample | None:
        """The job's training report from these points (None when they measured nothing)."""
        if not self._points:
            return None
        measurements = self._measurements()
        taken = sum(self._points.values())
        if not measurements:  # e.g. a cumulative histogram with no step since the previous export
            self.tally.accept(taken)
            return None
        try:
            sample = ADAPTER.translate({**self._context(), **measurements}).sample()
        except SampleError as exc:  # the adapter's own checks (a derived rate), after the per-field ones
            self.tally.reject(f"megatron.training.*: {exc}", taken)
            return None
        self.tally.accept(taken)
        return sample

    def _measurements(self) -> dict[str, Any]:
        """Each metric's value: a gauge's newest good one, an interval's mean step time or its sum."""
        out: dict[str, Any] = {name: value for name, (_, value) in self._gauges.items()}
        for name, (total, count) in self._sums.items():
            if name == STEP_DURATION and count == 0:
                continue  # no step completed in the interval: no step time
            value = total / count if name == STEP_DURATION else total
            if self._checked(name, value, self._points[name]):
                out[name] = value
            else:
                del self._points[name]
        return out

    def _context(self) -> dict[str, Any]:
        """The job's shape from the resource; an attribute that breaks its field's rule is left out, with a note."""
        out: dict[str, Any] = {}
        for attribute, (key, field) in RESOURCE_KEYS.items():
            if attribute not in self.resource:
                continue
            try:
                out[key] = check_value(f"training.{field}", self.resource[attribute], TRAINING_RULES[field])
            except SampleError as exc:
                self.tally.note(f"resource attribute {attribute} not used: {exc}")
        return out
