"""Metric points back into a :class:`~trainpulse_otel.samples.Frame`: the other half of :mod:`.conversion`.

:class:`FrameAssembler` takes points by instrument suffix (what the live
reader collected, what a node daemon's OTLP export carried) and builds the
frame. :class:`AssemblyPlan` is the same assembly decided ahead for a layout
of points seen before: a node daemon sends the same instruments over the same
attribute sets every export, so which GPU, rank or field each point fills
depends only on that layout, and each export then costs its values, not its
attributes (the OTLP receiver plans a node's layout once, :mod:`~trainpulse_otel.receive.layout`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ..samples import (
    PORT_COUNTERS,
    THROTTLE_REASONS,
    Frame,
    GpuKey,
    GpuSample,
    HostSample,
    NodeSample,
    PortKey,
    PortSample,
    RankSample,
    TrainingSample,
    XidCount,
    gpu_order,
    port_order,
)
from ..samples.builder import field_maker
from .catalog import (
    GPU,
    GPU_THROTTLE,
    GPU_XID,
    HOST,
    NODE,
    NONFINITE,
    PORT,
    PORT_INFO,
    RANK,
    RANK_PHASE,
    TRAINING,
    TRAINING_INFO,
    TRAINING_INFO_ATTRIBUTES,
)
from .conversion import _RESTORERS, _SPECS_BY_SUFFIX, Attributes, Number, Point

# Each sample made from the fields gathered for it (each field checked on its way in), through its slots.
_GPU = field_maker(GpuSample, ("index", "throttle_reasons", "node"))
_RANK = field_maker(RankSample, ("rank",))
_HOST = field_maker(HostSample)
_TRAINING = field_maker(TrainingSample, ("ranks",))

#: Points whose value says nothing their attributes do not (a non-finite loss's marker, the job's and a rank's
#: info points): a plan applies them once.
_BY_ATTRIBUTES = (NONFINITE, TRAINING_INFO, RANK_PHASE, PORT_INFO)
#: A port's fields beside its counters.
_PORT_FIELDS = ("state", "phys_state", "rate_gbps", "link_layer")


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
        self._ports: dict[PortKey, dict[str, Any]] = {}

    def add(self, suffix: str, attributes: Attributes, value: Number) -> None:
        """Take one point; points of instruments outside the catalogue are ignored."""
        spec = _SPECS_BY_SUFFIX.get(suffix)
        if spec is None:
            return
        if spec is GPU_THROTTLE:
            self._add_throttle(attributes, value)
        elif spec is GPU_XID:
            gpu, xid, node = self._xid_key(attributes)
            self._xids.append(XidCount(gpu, xid, int(value), node))
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
        elif spec is PORT_INFO:
            port = self._target(PORT, attributes)
            port.update(
                (key, str(attributes[key])) for key in ("state", "phys_state", "link_layer") if key in attributes
            )
        else:
            self._target(spec.scope, attributes)[spec.field] = _RESTORERS[suffix](value)

    def add_observations(self, observations: Mapping[str, Iterable[Point]]) -> None:
        """Take every point of an :func:`~.conversion.observe` result.

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
                or spec is PORT_INFO
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

    @classmethod
    def plan(cls, node: str | None, metrics: Sequence[tuple[str, Sequence[Attributes], type | None]]) -> AssemblyPlan:
        """Where the points of ``metrics`` go, whatever their values: each metric is an instrument suffix, its
        points' attributes in order and its values' type (int, float; None: both), and the plan's
        :meth:`AssemblyPlan.frame` of all their values, one after another, is the frame
        :meth:`add_observations` would build of them.

        What the attributes say (a GPU's uuid, a rank's GPU and host, the
        info points) is applied once, to a base the plan copies for each
        frame; each value is then one field of one target, one throttle
        reason or one XID total, found by its position.
        """
        base = cls(node)
        targets: dict[int, dict[str, Any]] = {}  # by the attributes dict's id, as in add_observations
        fills: dict[int, list[tuple[str, int, Callable[[Number], Number] | None]]] = {}  # by the target's id
        throttles: dict[GpuKey, list[tuple[str, int]]] = {}
        xids = []
        position = 0
        for suffix, attributes, value_type in metrics:
            spec = _SPECS_BY_SUFFIX.get(suffix)
            restore = _RESTORERS.get(suffix)
            as_read = value_type is not None and restore is value_type  # restoring would give the value back
            for attrs in attributes:
                if spec is None:
                    pass
                elif spec in _BY_ATTRIBUTES:
                    base.add(suffix, attrs, 1)
                elif spec is GPU_THROTTLE:
                    base._add_throttle(attrs, 0)
                    throttles.setdefault(base._gpu_key(attrs), []).append((str(attrs["reason"]), position))
                elif spec is GPU_XID:
                    xids.append((*base._xid_key(attrs), position))
                else:
                    target = targets.get(id(attrs))
                    if target is None:
                        target = targets[id(attrs)] = base._target(spec.scope, attrs)
                    fills.setdefault(id(target), []).append((spec.field, position, None if as_read else restore))
                position += 1
        return AssemblyPlan(
            base,
            position,
            tuple(_fill(index, fills.get(id(fields), ())) for index, fields in enumerate(base._fields())),
            tuple((key, tuple(r for r, _ in got), taker([i for _, i in got])) for key, got in throttles.items()),
            tuple(xids),
        )

    def frame(self, ts: float) -> Frame:
        """The Frame for everything added so far."""
        gpus = tuple(self._gpu(key) for key in sorted(self._gpus.keys() | self._throttle.keys(), key=gpu_order))
        host = _HOST(self._host) if self._host else None
        training = None
        if self._has_training or self._training or self._ranks:
            ranks = tuple(_RANK(self._ranks[r], r) for r in sorted(self._ranks))
            training = _TRAINING(self._training, ranks)
        xids = tuple(sorted(self._xids, key=_xid_order))
        ports = tuple(sorted((_port(key, fields) for key, fields in self._ports.items()), key=port_order))
        return Frame(
            ts=ts, gpus=gpus, host=host, training=training, xid_counts=xids, nodes=self._node_samples(), ports=ports
        )

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
        if scope == PORT:
            node = attributes.get("hostname")
            key = (self.node if node is None else str(node), str(attributes["ib.device"]), int(attributes["ib.port"]))
            return self._ports.setdefault(key, {})
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
        return _GPU(fields, key[1], throttle, key[0])

    def _xid_key(self, attributes: Attributes) -> tuple[int, int, str | None]:
        """An XID total's GPU index, XID code and node."""
        node = str(attributes["hostname"]) if "hostname" in attributes else self.node
        return int(attributes["gpu.index"]), int(attributes["xid"]), node

    def _fields(self) -> list[dict[str, Any]]:
        """Every sample's fields gathered so far, in one order (a copy's in the same order)."""
        return [
            *self._gpus.values(),
            self._host,
            *self._nodes.values(),
            *self._node_hosts.values(),
            self._training,
            *self._ranks.values(),
            *self._ports.values(),
        ]

    def _copy(self) -> FrameAssembler:
        """An assembler holding copies of everything gathered so far, to add to without touching this one."""
        other = FrameAssembler(self.node)
        other._gpus = {key: dict(fields) for key, fields in self._gpus.items()}
        other._throttle = {key: set(active) for key, active in self._throttle.items()}
        other._host = dict(self._host)
        other._nodes = {key: dict(fields) for key, fields in self._nodes.items()}
        other._node_hosts = {key: dict(fields) for key, fields in self._node_hosts.items()}
        other._training = dict(self._training)
        other._ranks = {key: dict(fields) for key, fields in self._ranks.items()}
        other._has_training = self._has_training
        other._xids = list(self._xids)
        other._ports = {key: dict(fields) for key, fields in self._ports.items()}
        return other

    def _gpu_key(self, attributes: Attributes) -> GpuKey:
        node = attributes.get("hostname")
        return (self.node if node is None else str(node), int(attributes["gpu.index"]))


def _xid_order(xid: XidCount) -> tuple[str, int, int]:
    return xid.sort_key


def _port(key: PortKey, fields: Mapping[str, Any]) -> PortSample:
    """A port from the fields gathered for it: its state and rate, its counters in the samples' order."""
    node, device, number = key
    counters = tuple((name, fields[name]) for name in PORT_COUNTERS if name in fields)
    return PortSample(device, number, *(fields.get(name) for name in _PORT_FIELDS), counters=counters, node=node)


Taker = Callable[[Sequence[Number]], tuple[Number, ...]]


def taker(positions: Sequence[int]) -> Taker:
    """The values at ``positions``, as a tuple, in one call (``itemgetter`` answers one position with no tuple)."""
    if len(positions) == 1:
        (only,) = positions
        return lambda values: (values[only],)
    return itemgetter(*positions)


def _fill(
    index: int, fields: Sequence[tuple[str, int, Callable[[Number], Number] | None]]
) -> tuple[int, tuple[str, ...], Taker | None, tuple[tuple[str, int, Callable[[Number], Number]], ...]]:
    """A target's fill: its index, the fields taken as read (names and one taker), those restored one by one."""
    as_read = [(field, position) for field, position, restore in fields if restore is None]
    restored = tuple((field, position, restore) for field, position, restore in fields if restore is not None)
    take = taker([position for _, position in as_read]) if as_read else None
    return index, tuple(field for field, _ in as_read), take, restored


@dataclass(frozen=True, slots=True)
class AssemblyPlan:
    """A layout of points, planned (:meth:`FrameAssembler.plan`): its values, one after another, into a frame.

    ``fills`` has one entry per target (a GPU's fields, a rank's, the
    host's…, by its index in the base's :meth:`FrameAssembler._fields`):
    the fields its values go to as read, taken in one call, and those a
    restorer converts (a scaled field, an int point of a float field);
    ``throttles`` each GPU's reasons and their positions; ``xids`` each XID
    total's GPU, code, node and position. What the attributes alone said is
    in ``base``.
    """

    base: FrameAssembler
    size: int
    fills: tuple[
        tuple[int, tuple[str, ...], Taker | None, tuple[tuple[str, int, Callable[[Number], Number]], ...]], ...
    ]
    throttles: tuple[tuple[GpuKey, tuple[str, ...], Taker], ...]
    xids: tuple[tuple[int, int, str | None, int], ...]

    def frame(self, values: Sequence[Number], ts: float = 0.0) -> Frame:
        """The frame of ``values``: every point's, in the plan's order (:attr:`size` of them)."""
        if len(values) != self.size:
            raise ValueError(f"a plan of {self.size} points was handed {len(values)} values")
        assembler = self.base._copy()
        targets = assembler._fields()
        for index, names, take, restored in self.fills:
            fields = targets[index]
            if take is not None:
                fields.update(zip(names, take(values), strict=True))
            for field, position, restore in restored:
                fields[field] = restore(values[position])
        for key, reasons, take in self.throttles:
            assembler._throttle[key].update(reason for reason, on in zip(reasons, take(values), strict=True) if on)
        for gpu, xid, node, position in self.xids:
            assembler._xids.append(XidCount(gpu, xid, int(values[position]), node))
        return assembler.frame(ts)
