"""Samples → frame directly: what the in-process reader would build, without the points in between.

Replay reads each sample back field by field through the catalogue and the
restorers of :mod:`.conversion`, so the frame equals ``observe`` followed by
:class:`~.assembly.FrameAssembler` (a property test holds the two together
over arbitrary samples, job views with other nodes included) at a fraction of
the cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from operator import attrgetter, contains
from typing import Any

from ..samples import (
    THROTTLE_REASONS,
    Frame,
    GpuSample,
    HostSample,
    NodeSample,
    PortSample,
    RankSample,
    TrainingSample,
    XidCount,
    gpu_order,
    port_order,
)
from ..samples.builder import field_replacer
from .catalog import GPU, HOST, NODE, RANK, TRAINING, TRAINING_INFO_ATTRIBUTES
from .conversion import _INT_FIELDS, _RESTORERS, _SPECS_BY_SCOPE, Number


def frame_from_samples(
    ts: float,
    gpus: Iterable[GpuSample] = (),
    host: HostSample | None = None,
    training: TrainingSample | None = None,
    xid_counts: Iterable[XidCount] = (),
    nodes: Iterable[NodeSample] = (),
    memo: ReadBackMemo | None = None,
    ports: Iterable[PortSample] = (),
) -> Frame:
    """The frame the in-process reader builds for these samples, without the points in between.

    Each sample is read back field by field through the same catalogue and
    restorers, so the result equals :func:`~.conversion.observe` followed by
    :class:`~.assembly.FrameAssembler` (a property test holds the two together over
    arbitrary samples) at a fraction of the cost. Replay uses it.
    GPU indices and ranks must be unique, as parsing and the collectors
    guarantee. ``memo`` (one per stream of frames) reads a sample the previous
    frame already read back as it did then.
    """
    gpu_read, rank_read = (memo.gpu, memo.rank) if memo is not None else (_gpu_read_back, _rank_read_back)
    read_gpus = (gpu_read(gpu) for gpu in sorted(gpus, key=_sample_order))
    frame = Frame(
        ts=ts,
        gpus=tuple(g for g in read_gpus if g is not None),
        host=_host_read_back(host) if host is not None else None,
        training=_training_read_back(training, rank_read) if training is not None else None,
        xid_counts=tuple(sorted(xid_counts, key=_xid_order)),
        nodes=tuple(_node_read_back(n) for n in sorted(nodes, key=_hostname)),
        ports=tuple(sorted(ports, key=port_order)),  # their fields read as they are
    )
    if memo is not None:
        memo.turn()
    return frame


class ReadBackMemo:
    """The read-backs of the previous frame's GPU and rank samples, by identity.

    Samples are immutable, so one still held unchanged (a job daemon's node
    that has not pushed since; a rank that has not reported) reads back as it
    did: at 16,384 ranks pushed every few seconds, most of a tick's read-back
    is of samples read the tick before. Only the last frame's are kept.
    """

    __slots__ = ("_current", "_previous")

    def __init__(self) -> None:
        self._previous: dict[int, tuple[Any, Any]] = {}
        self._current: dict[int, tuple[Any, Any]] = {}

    def gpu(self, gpu: GpuSample) -> GpuSample | None:
        return self._read(gpu, _gpu_read_back)

    def rank(self, rank: RankSample) -> RankSample | None:
        return self._read(rank, _rank_read_back)

    def turn(self) -> None:
        """The frame is built: its samples are the ones the next frame may meet again."""
        self._previous, self._current = self._current, {}

    def _read(self, sample: Any, read: Callable[[Any], Any]) -> Any:
        key = id(sample)
        known = self._previous.get(key)
        if known is None or known[0] is not sample:
            known = (sample, read(sample))
        self._current[key] = known
        return known[1]


def _sample_order(gpu: GpuSample) -> tuple[str, int]:
    return gpu_order(gpu.key)


def _hostname(node: NodeSample) -> str:
    return node.hostname


def _node_read_back(node: NodeSample) -> NodeSample:
    host = _host_read_back(node.host) if node.host is not None else None
    if host is node.host and _reads_back_as_is(node, NODE):
        return node  # its liveness and its host already as their points restore them: the usual case
    return NodeSample(node.hostname, host=host, signals=node.signals, gpus=node.gpus, **_read_back(node, NODE))


_READ_BACK: dict[str, tuple[tuple[str, float, Callable[[Number], Number]], ...]] = {
    scope: tuple((s.field, s.scale, _RESTORERS[s.suffix]) for s in specs) for scope, specs in _SPECS_BY_SCOPE.items()
}


def _survives_round_trip(scale: float, restore: Callable[[Number], Number]) -> Callable[[Number], bool]:
    """Whether a scaled field's value comes back from its point as itself (a clock in MHz goes out in Hz and
    comes back rounded to 6 decimals: 1410.0 does, 1410.1234567 does not); cached, as a GPU's clocks take
    few values."""

    @lru_cache(maxsize=4096)
    def survives(value: Number) -> bool:
        return restore(value * scale) == value  # ±0.0 and equal values share an entry: they share the answer

    return survives


def _as_is_check(scope: str) -> Callable[[Any], bool]:
    """The check :func:`_reads_back_as_is` makes for ``scope``'s samples.

    The measured fields are read in one ``attrgetter`` call; each value must be None or exactly of its kind
    (``float(x)`` and ``int(x)`` return ``x`` itself only then: one set lookup of its type per field, in C), one
    of them must not be None, and each scaled field's value must survive its round trip.
    """
    specs = _READ_BACK[scope]
    read = attrgetter(*(field for field, _, _ in specs))
    allowed = tuple(frozenset({int if field in _INT_FIELDS[scope] else float, type(None)}) for field, _, _ in specs)
    unmeasured = (None,) * len(specs)
    scaled = tuple(
        (i, _survives_round_trip(scale, restore)) for i, (_, scale, restore) in enumerate(specs) if scale != 1.0
    )

    def as_is(sample: Any) -> bool:
        values = read(sample)
        if values == unmeasured or not all(map(contains, allowed, map(type, values))):
            return False
        return all(values[i] is None or survives(values[i]) for i, survives in scaled)

    return as_is


_AS_IS: dict[str, Callable[[Any], bool]] = {scope: _as_is_check(scope) for scope in _READ_BACK}


def _reads_back_as_is(sample: Any, scope: str) -> bool:
    """Whether each measured field of ``sample`` already holds what its point restores, and one holds a value.

    Then the read-back would equal the sample's measurements, so a sample carrying nothing outside them can
    be handed on uncopied. Validation leaves every value of its kind, so this is the usual case.
    """
    return _AS_IS[scope](sample)


def _read_back(sample: Any, scope: str) -> dict[str, Any]:
    """The measured fields of one sample as a point would restore them (a field without a value has no point)."""
    out = {}
    for field, scale, restore in _READ_BACK[scope]:
        value = getattr(sample, field)
        if value is not None:
            out[field] = restore(value if scale == 1.0 else value * scale)
    return out


def _host_read_back(host: HostSample) -> HostSample | None:
    if _reads_back_as_is(host, HOST):
        return host  # every host field is a measurement
    fields = _read_back(host, HOST)
    return HostSample(**fields) if fields else None


def _gpu_read_back(gpu: GpuSample) -> GpuSample | None:
    reasons = gpu.throttle_reasons
    if (reasons is None or _in_catalogue_order(reasons)) and _reads_back_as_is(gpu, GPU):
        # at 256 GPUs a tick, not reading each field back is a tenth of a job replay's time
        return gpu if gpu.xid_errors is None else _without_xid_errors(gpu)
    fields = _read_back(gpu, GPU)
    if reasons is not None:
        active = set(reasons)
        reasons = tuple(r for r in THROTTLE_REASONS if r in active)
    if not fields and reasons is None:
        return None  # nothing measured: no point carries this GPU
    return GpuSample(index=gpu.index, uuid=gpu.uuid, name=gpu.name, throttle_reasons=reasons, node=gpu.node, **fields)


@lru_cache(maxsize=256)
def _in_catalogue_order(reasons: tuple[str, ...]) -> bool:
    """Whether throttle reasons are already as their points read back: each once, in THROTTLE_REASONS order."""
    active = set(reasons)
    return reasons == tuple(r for r in THROTTLE_REASONS if r in active)


#: ``gpu`` without its XID codes (the frame carries the totals, :class:`XidCount`).
_WITH_XID_ERRORS = field_replacer(GpuSample, "xid_errors")


def _without_xid_errors(gpu: GpuSample) -> GpuSample:
    return _WITH_XID_ERRORS(gpu, None)


def _training_read_back(
    training: TrainingSample, rank_read: Callable[[RankSample], RankSample | None]
) -> TrainingSample:
    fields = _read_back(training, TRAINING)
    for field in TRAINING_INFO_ATTRIBUTES:  # the info point's attributes, read back as strings
        value = getattr(training, field)
        if value is not None:
            fields[field] = str(value)
    read_ranks = map(rank_read, sorted(training.ranks, key=_RANK_NUMBER))
    return TrainingSample(**fields, ranks=tuple(r for r in read_ranks if r is not None))


def _rank_read_back(rank: RankSample) -> RankSample | None:
    if (rank.phase is not None or rank.pid is None) and _reads_back_as_is(rank, RANK):
        return rank  # at thousands of ranks a tick, not copying halves the frame's cost
    measured = _read_back(rank, RANK)
    if rank.phase is not None:  # the phase point, which carries the pid
        measured.update(phase=rank.phase, pid=rank.pid)
    if not measured:
        return None  # a rank without a measurement has no point
    return RankSample(rank=rank.rank, gpu_index=rank.gpu_index, hostname=rank.hostname, **measured)


#: A rank's number, read in one C call (this runs over every rank of every frame).
_RANK_NUMBER = attrgetter("rank")


def _xid_order(xid: XidCount) -> tuple[str, int, int]:
    return xid.sort_key
