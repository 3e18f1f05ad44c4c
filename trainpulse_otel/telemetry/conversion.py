"""The one shared conversion between samples and metric points.

``observe`` turns the latest samples into the points the observable instruments
report; :class:`FrameAssembler` turns collected points back into a
:class:`~trainpulse_otel.samples.Frame`. The live path goes
samples → observe → OTel SDK → MetricsData → assembler. Replay skips the
points: :func:`.read_back.frame_from_samples` reads each sample back through the same
catalogue and restorers, and a property test holds it equal to ``observe``
followed by the assembler, so a replayed frame is the frame the daemon saw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..samples import (
    GPU_RULES,
    HOST_RULES,
    RANK_RULES,
    THROTTLE_REASONS,
    TRAINING_RULES,
    Frame,
    GpuKey,
    GpuSample,
    HostSample,
    NodeSample,
    RankSample,
    TrainingSample,
    XidCount,
    gpu_order,
)
from .catalog import (
    ALL_INPUTS,
    GPU,
    GPU_THROTTLE,
    GPU_XID,
    HOST,
    MEASUREMENTS,
    NODE,
    NONFINITE,
    RANK,
    RANK_PHASE,
    TRAINING,
    TRAINING_INFO,
    TRAINING_INFO_ATTRIBUTES,
    MetricSpec,
)

Number = int | float
Attributes = Mapping[str, str | int]
Point = tuple[Number, Attributes]
Observations = dict[str, list[Point]]

_SPECS_BY_SCOPE: dict[str, tuple[MetricSpec, ...]] = {
    scope: tuple(s for s in MEASUREMENTS if s.scope == scope) for scope in (GPU, HOST, TRAINING, RANK, NODE)
}
_SPECS_BY_SUFFIX: dict[str, MetricSpec] = {s.suffix: s for s in ALL_INPUTS}
_INT_FIELDS: dict[str, frozenset[str]] = {
    scope: frozenset(name for name, rule in rules.items() if rule.kind == "int")
    for scope, rules in ((GPU, GPU_RULES), (HOST, HOST_RULES), (TRAINING, TRAINING_RULES), (RANK, RANK_RULES))
}
_INT_FIELDS[NODE] = frozenset()  # a node's liveness: unix seconds and a gap in seconds


# ------------------------------------------------------------ samples → points


def gpu_attributes(gpu: GpuSample) -> dict[str, str | int]:
    """Data-point attributes that identify a GPU (``gpu.index``, ``gpu.uuid``, ``gpu.name``; ``hostname``
    for another node's GPU on a job daemon)."""
    attrs: dict[str, str | int] = {"gpu.index": gpu.index}
    if gpu.node is not None:
        attrs["hostname"] = gpu.node
    if gpu.uuid is not None:
        attrs["gpu.uuid"] = gpu.uuid
    if gpu.name is not None:
        attrs["gpu.name"] = gpu.name
    return attrs


def rank_attributes(rank: RankSample) -> dict[str, str | int]:
    """Data-point attributes that identify a rank (``rank``, ``gpu.index``, ``hostname``)."""
    attrs: dict[str, str | int] = {"rank": rank.rank}
    if rank.gpu_index is not None:
        attrs["gpu.index"] = rank.gpu_index
    if rank.hostname is not None:
        attrs["hostname"] = rank.hostname
    return attrs


def training_attributes(training: TrainingSample) -> dict[str, str]:
    """Job attributes put on every job-level training point (``model``, ``framework``)."""
    attrs = {}
    if training.model_name is not None:
        attrs["model"] = training.model_name
    if training.framework is not None:
        attrs["framework"] = training.framework
    return attrs


#: The fields that may hold NaN or ±inf (validation refuses them elsewhere).
NONFINITE_FIELDS = ("loss", "grad_norm")


def _add_fields(out: Observations, specs: Iterable[MetricSpec], sample: Any, attrs: Attributes) -> None:
    for spec in specs:
        value = getattr(sample, spec.field)
        if value is None or (spec.field in NONFINITE_FIELDS and not math.isfinite(value)):
            continue  # the OTel SDK drops a non-finite measurement: _add_nonfinite carries it
        out[spec.suffix].append((value if spec.scale == 1.0 else value * spec.scale, attrs))


def _add_nonfinite(out: Observations, sample: Any, attrs: Attributes) -> None:
    """A NaN/±inf loss or gradient norm as a point of the NONFINITE series (its own gauge has none)."""
    for field in NONFINITE_FIELDS:
        value = getattr(sample, field)
        if value is not None and not math.isfinite(value):
            out[NONFINITE.suffix].append((1, {**attrs, "field": field, "value": _token(value)}))


def _token(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def observe(
    gpus: Iterable[GpuSample] = (),
    host: HostSample | None = None,
    training: TrainingSample | None = None,
    xid_counts: Iterable[XidCount] = (),
    nodes: Iterable[NodeSample] = (),
) -> Observations:
    """Every measurement point for these samples (and the XID totals, and the job's other nodes),
    keyed by instrument suffix."""
    out: Observations = {spec.suffix: [] for spec in ALL_INPUTS}
    out[GPU_XID.suffix] = [(x.count, _xid_attributes(x)) for x in xid_counts]
    for node in nodes:  # one attributes dict per sample: the assembler resolves its target once per dict
        _add_fields(out, _SPECS_BY_SCOPE[NODE], node, {"hostname": node.hostname})
        if node.host is not None:
            _add_fields(out, _SPECS_BY_SCOPE[HOST], node.host, {"hostname": node.hostname})
    for gpu in gpus:
        attrs = gpu_attributes(gpu)
        _add_fields(out, _SPECS_BY_SCOPE[GPU], gpu, attrs)
        if gpu.throttle_reasons is not None:
            active = set(gpu.throttle_reasons)
            out[GPU_THROTTLE.suffix].extend(
                (1 if reason in active else 0, {**attrs, "reason": reason}) for reason in THROTTLE_REASONS
            )
    if host is not None:
        _add_fields(out, _SPECS_BY_SCOPE[HOST], host, {})
    if training is not None:
        job = training_attributes(training)
        _add_fields(out, _SPECS_BY_SCOPE[TRAINING], training, job)
        _add_nonfinite(out, training, job)
        out[TRAINING_INFO.suffix].append((1, _info_attributes(training)))
        for rank in training.ranks:
            attrs = rank_attributes(rank)
            _add_fields(out, _SPECS_BY_SCOPE[RANK], rank, attrs)
            _add_nonfinite(out, rank, attrs)
            if rank.phase is not None:
                out[RANK_PHASE.suffix].append((1, _phase_attributes(rank, attrs)))
    return out


def _xid_attributes(xid: XidCount) -> dict[str, str | int]:
    attrs: dict[str, str | int] = {"gpu.index": xid.gpu_index, "xid": xid.xid}
    if xid.node is not None:
        attrs["hostname"] = xid.node
    return attrs


def _phase_attributes(rank: RankSample, attrs: Attributes) -> dict[str, str | int]:
    """The rank's attributes plus its phase and, when known, its process id (the info point of its heartbeat)."""
    out: dict[str, str | int] = {**attrs, "phase": rank.phase}  # type: ignore[dict-item]
    if rank.pid is not None:
        out["process.pid"] = rank.pid
    return out


def _info_attributes(training: TrainingSample) -> dict[str, str]:
    return {
        key: getattr(training, field)
        for field, key in TRAINING_INFO_ATTRIBUTES.items()
        if getattr(training, field) is not None
    }


# ------------------------------------------------------------ points → frame


class FrameAssembler:
    """Collects metric points (by instrument suffix) and builds one Frame from them.

    ``node`` is the node that GPU, XID and rank points naming no ``hostname``
    are on: None for this daemon's own, a hostname when a job daemon assembles
    what one node sent (its GPUs and ranks then arrive tagged, not copied once
    more to be tagged).
    """

    def __init__(self, node: str | None = None) -> None:
        self.node = node
        self._gpus: dict[GpuKey, dict[str, Any]] = {}
        self._throttle: dict[GpuKey, set[str]] = {}
        self._host: dict[str, Any] = {}
        self._nodes: dict[str, dict[str, Any]] = {}
        self._node_hosts: dict[str, dict[str, Any]] = {}
        self._training: dict[str, Any] = {}
        self._ranks: dict[int, dict[str, Any]] = {}
        self._has_training = False
        self._xids: list[XidCount] = []

    def add(self, suffix: str, attributes: Attributes, value: Number) -> None:
        """Take one point; points of instruments outside the catalogue are ignored."""
        spec = _SPECS_BY_SUFFIX.get(suffix)
        if spec is None:
            return
        if spec is GPU_THROTTLE:
            self._add_throttle(attributes, value)
        elif spec is GPU_XID:
            node = str(attributes["hostname"]) if "hostname" in attributes else self.node
            self._xids.append(XidCount(int(attributes["gpu.index"]), int(attributes["xid"]), int(value), node))
        elif spec is NONFINITE:
            scope = RANK if "rank" in attributes else TRAINING
            self._target(scope, attributes)[str(attributes["field"])] = float(str(attributes["value"]))
        elif spec is TRAINING_INFO:
            self._has_training = True
            for field, key in TRAINING_INFO_ATTRIBUTES.items():
                if key in attributes:
                    self._training[field] = str(attributes[key])
        elif spec is RANK_PHASE:
            rank = self._target(RANK, attributes)
            rank["phase"] = str(attributes["phase"])
            if "process.pid" in attributes:
                rank["pid"] = int(attributes["process.pid"])
        else:
            self._target(spec.scope, attributes)[spec.field] = _RESTORERS[suffix](value)

    def add_observations(self, observations: Mapping[str, Iterable[Point]]) -> None:
        """Take every point of an :func:`observe` result.

        Same outcome as :meth:`add` per point, faster: ``observe`` shares one
        attributes dict among all points of a GPU or rank (as the OTLP
        receiver's remembered sets do among a scope's), so the target is
        resolved once per sample instead of once per point.
        """
        targets: dict[int, dict[str, Any]] = {}
        known_target = targets.get
        for suffix, points in observations.items():
            spec = _SPECS_BY_SUFFIX.get(suffix)
            if spec is None or not points:
                continue
            if (
                spec is GPU_THROTTLE
                or spec is TRAINING_INFO
                or spec is GPU_XID
                or spec is NONFINITE
                or spec is RANK_PHASE
            ):
                for value, attrs in points:
                    if spec is GPU_THROTTLE:  # a GPU's every throttle reason: the most points of an export
                        self._add_throttle(attrs, value)
                    else:
                        self.add(suffix, attrs, value)
                continue
            restore, field, scope = _RESTORERS[suffix], spec.field, spec.scope
            for value, attrs in points:
                target = known_target(id(attrs))
                if target is None:
                    target = targets[id(attrs)] = self._target(scope, attrs)
                target[field] = value if restore is float and type(value) is float else restore(value)

    def frame(self, ts: float) -> Frame:
        """The Frame for everything added so far."""
        gpus = tuple(self._gpu(key) for key in sorted(self._gpus.keys() | self._throttle.keys(), key=gpu_order))
        host = HostSample(**self._host) if self._host else None
        training = None
        if self._has_training or self._training or self._ranks:
            ranks = tuple(RankSample(rank=r, **self._ranks[r]) for r in sorted(self._ranks))
            training = TrainingSample(**self._training, ranks=ranks)
        xids = tuple(sorted(self._xids, key=_xid_order))
        return Frame(ts=ts, gpus=gpus, host=host, training=training, xid_counts=xids, nodes=self._node_samples())

    def _node_samples(self) -> tuple[NodeSample, ...]:
        """The nodes whose liveness arrived; a node's host points without it make no node."""
        out = []
        for hostname in sorted(self._nodes):
            fields = self._nodes[hostname]
            if "last_seen" in fields:
                host = self._node_hosts.get(hostname)
                out.append(NodeSample(hostname, host=HostSample(**host) if host else None, **fields))
        return tuple(out)

    def _target(self, scope: str, attributes: Attributes) -> dict[str, Any]:
        if scope == HOST:
            if "hostname" in attributes:
                return self._node_hosts.setdefault(str(attributes["hostname"]), {})
            return self._host
        if scope == NODE:
            return self._nodes.setdefault(str(attributes["hostname"]), {})
        if scope == TRAINING:
            self._has_training = True
            return self._training
        if scope == GPU:
            return self._gpu_fields(attributes)
        rank = self._ranks.setdefault(int(attributes["rank"]), {})
        if "gpu.index" in attributes:
            rank["gpu_index"] = int(attributes["gpu.index"])
        if "hostname" in attributes:
            rank["hostname"] = str(attributes["hostname"])
        elif self.node is not None:
            rank["hostname"] = self.node
        return rank

    def _gpu_fields(self, attributes: Attributes) -> dict[str, Any]:
        gpu = self._gpus.setdefault(self._gpu_key(attributes), {})
        if "gpu.uuid" in attributes:
            gpu["uuid"] = str(attributes["gpu.uuid"])
        if "gpu.name" in attributes:
            gpu["name"] = str(attributes["gpu.name"])
        return gpu

    def _add_throttle(self, attributes: Attributes, value: Number) -> None:
        key = self._gpu_key(attributes)
        active = self._throttle.get(key)
        if active is None:
            self._gpu_fields(attributes)
            active = self._throttle[key] = set()
        if value:
            active.add(str(attributes["reason"]))

    def _gpu(self, key: GpuKey) -> GpuSample:
        fields = self._gpus.get(key, {})
        reasons = self._throttle.get(key)
        throttle = None if reasons is None else tuple(r for r in THROTTLE_REASONS if r in reasons)
        return GpuSample(index=key[1], throttle_reasons=throttle, node=key[0], **fields)

    def _gpu_key(self, attributes: Attributes) -> GpuKey:
        node = attributes.get("hostname")
        return (self.node if node is None else str(node), int(attributes["gpu.index"]))


def _xid_order(xid: XidCount) -> tuple[str, int, int]:
    return xid.sort_key


def _restorer(spec: MetricSpec) -> Callable[[Number], Number]:
    """How a point's value becomes the sample field again: unscale, then int or float."""
    kind: Callable[[Number], Number] = int if spec.field in _INT_FIELDS[spec.scope] else float
    if spec.scale == 1.0:
        return kind
    scale = spec.scale
    return lambda value: kind(round(value / scale, 6))


_RESTORERS: dict[str, Callable[[Number], Number]] = {s.suffix: _restorer(s) for s in MEASUREMENTS}
