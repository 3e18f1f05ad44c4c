"""A judging node daemon's verdict, read from its own export: judge locally, correlate globally.

A TrainPulse node daemon exports its diagnosis beside its measurements:
``trainpulse.health.score`` says it judges its GPUs and host, and each point of
``trainpulse.signal.subject{signal, severity, hostname, rank, gpu_index}`` is a
subject of one of its active signals (the gauge is absent while none is). A
job daemon takes that verdict instead of judging the node's GPUs again
(:class:`~trainpulse_otel.samples.NodeSignal`). Only names and attributes are
read, before the points' values are taken.
"""

from __future__ import annotations

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric

from ..samples import NodeSignal
from .points import attribute_dict

#: The instrument whose presence says the node's daemon judges (every TrainPulse daemon exports its health).
HEALTH = "health.score"
#: The active signals' subjects: one point a subject (``publish.otel.subject_labels``).
SUBJECTS = "signal.subject"
#: Subject labels carried as integers in a signal's subject.
INTEGER_LABELS = ("rank", "gpu_index")
#: The most signals one node's verdict may name (a flood of subjects is cut, never a reason to refuse the export).
MAX_NODE_SIGNALS = 256


class VerdictReader:
    """The verdict one resource (one node) carries in its TrainPulse scope."""

    __slots__ = ("_health", "_prefix", "_signals", "hostname")

    def __init__(self, hostname: str, prefix: str) -> None:
        self.hostname = hostname
        self._prefix = prefix
        self._health = prefix + HEALTH
        self._signals: dict[tuple, NodeSignal] | None = None

    def read(self, metric: Metric, name: str) -> None:
        """Note what ``metric`` (named ``name``) says of the verdict; any other metric is passed over."""
        if name == self._health:
            if self._signals is None:
                self._signals = {}
        elif name == self._prefix + SUBJECTS and metric.WhichOneof("data") == "gauge":
            if self._signals is None:
                self._signals = {}
            for point in metric.gauge.data_points:
                signal = self._signal(attribute_dict(point.attributes))
                if signal is not None and len(self._signals) < MAX_NODE_SIGNALS:
                    self._signals[(signal.name, signal.severity, *sorted(signal.subject.items()))] = signal

    def signals(self) -> tuple[NodeSignal, ...] | None:
        """The node's active signals; None when its export carried no verdict (it does not judge)."""
        return None if self._signals is None else tuple(self._signals.values())

    def _signal(self, labels: dict) -> NodeSignal | None:
        name, severity = labels.get("signal"), labels.get("severity")
        if not isinstance(name, str) or severity not in ("warning", "critical"):
            return None
        subject: dict[str, str | int] = {"hostname": self.hostname}
        for key in INTEGER_LABELS:
            value = labels.get(key)
            if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                subject[key] = int(value)
        return NodeSignal(name, severity, subject)
