"""The one shared conversion between samples and metric points.

``observe`` turns the latest samples into the points the observable instruments
report; :class:`~.assembly.FrameAssembler` turns collected points back into a
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
    GpuSample,
    HostSample,
    NodeSample,
    PortSample,
    RankSample,
    TrainingSample,
    XidCount,
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
    PORT,
    PORT_INFO,
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
    scope: tuple(s for s in MEASUREMENTS if s.scope == scope) for scope in (GPU, HOST, TRAINING, RANK, NODE, PORT)
}
_SPECS_BY_SUFFIX: dict[str, MetricSpec] = {s.suffix: s for s in ALL_INPUTS}
_INT_FIELDS: dict[str, frozenset[str]] = {
    scope: frozenset(name for name, rule in rules.items() if rule.kind == "int")
    for scope, rules in ((GPU, GPU_RULES), (HOST, HOST_RULES), (TRAINING, TRAINING_RULES), (RANK, RANK_RULES))
}
_INT_FIELDS[NODE] = frozenset()  # a node's liveness: unix seconds and a gap in seconds
_INT_FIELDS[PORT] = frozenset(s.field for s in _SPECS_BY_SCOPE[PORT] if s.monotonic)  # its counters


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


def port_attributes(port: PortSample) -> dict[str, str | int]:
    """Data-point attributes that identify an InfiniBand/RoCE port (``ib.device``, ``ib.port``; ``hostname`` for
    another node's)."""
    attrs: dict[str, str | int] = {"ib.device": port.device, "ib.port": port.port}
    if port.node is not None:
        attrs["hostname"] = port.node
    return attrs


def _add_port(out: Observations, port: PortSample) -> None:
    """A port's counters, rate and state (its info point)."""
    attrs = port_attributes(port)
    for spec in _SPECS_BY_SCOPE[PORT]:
        value = port.counter(spec.field) if spec.monotonic else getattr(port, spec.field)
        if value is not None:
            out[spec.suffix].append((value if spec.scale == 1.0 else value * spec.scale, attrs))
    info = {key: value for key in ("state", "phys_state", "link_layer") if (value := getattr(port, key)) is not None}
    out[PORT_INFO.suffix].append((1, {**attrs, **info}))


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
    node_hosts: bool = True,
    ports: Iterable[PortSample] = (),
) -> Observations:
    """Every measurement point for these samples (and the XID totals, the job's other nodes: their summaries,
    and their hosts unless ``node_hosts`` is False; the InfiniBand/RoCE ports), keyed by instrument suffix."""
    out: Observations = {spec.suffix: [] for spec in ALL_INPUTS}
    out[GPU_XID.suffix] = [(x.count, _xid_attributes(x)) for x in xid_counts]
    for node in nodes:  # one attributes dict per sample: the assembler resolves its target once per dict
        _add_fields(out, _SPECS_BY_SCOPE[NODE], node, {"hostname": node.hostname})
        if node.host is not None and node_hosts:
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
    for port in ports:
        _add_port(out, port)
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


def _restorer(spec: MetricSpec) -> Callable[[Number], Number]:
    """How a point's value becomes the sample field again: unscale, then int or float."""
    kind: Callable[[Number], Number] = int if spec.field in _INT_FIELDS[spec.scope] else float
    if spec.scale == 1.0:
        return kind
    scale = spec.scale
    return lambda value: kind(round(value / scale, 6))


_RESTORERS: dict[str, Callable[[Number], Number]] = {s.suffix: _restorer(s) for s in MEASUREMENTS}
