"""The latest samples: written by collectors and ingest, read by the observable instruments.

Observable gauges report whatever is here when a reader collects, so nothing is
paid between reads. Training reports are merged: a report replaces the
job-level view, while per-rank entries are merged by rank (ranks may report
separately), and both expire when they stop arriving. A rank's entry has two
parts that arrive apart: its step measurements (the rank gather, every few
steps) and its heartbeat (``global_step``, ``phase``, ``phase_since``, ``pid``,
every few seconds, also while its step is blocked). An entry that carries
only one part keeps the other as it was, so a heartbeat keeps a blocked rank
alive without repeating — or erasing — its last step's numbers. A heartbeat's ``stack`` is
no measurement: it is kept beside the ranks (:meth:`LatestSamples.stacks`) until the rank's next
heartbeat without one. The clock is passed in (``now``), so replay can drive this with a trace's
timestamps.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, is_not

from ..samples import (
    DEFAULT_MAX_RANKS,
    RANK_PARTS,
    Collected,
    GpuSample,
    HostSample,
    LogEvent,
    LossPoint,
    NodeReport,
    NodeSample,
    PortSample,
    RankSample,
    RankStack,
    TrainingSample,
    XidCount,
    carried_parts,
    has_job_measurement,
    loss_points,
    merged_rank,
    with_job_description,
)
from ..samples.builder import field_replacer
from .conversion import Observations, observe
from .nodes import NodeTable
from .xids import XidTotals, count_xid_events, xid_counts

DEFAULT_STALE_AFTER_S = 300.0
#: ``node_series``: a job daemon reports only the series it owns (``owner``), or every node's too (``all``).
OWNER, ALL = "owner", "all"
NODE_SERIES = (OWNER, ALL)
#: Loss points kept between two frames (oldest dropped first): a tick's worth even at thousands of reports/s.
MAX_PENDING_LOSSES = 16384
#: Failure events kept between two frames (oldest dropped first): a crashing job's ranks print a few each.
MAX_PENDING_EVENTS = 4096


class LatestSamples:
    """Thread-safe holder of the newest GPU, host and training samples."""

    def __init__(
        self,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        max_ranks: int = DEFAULT_MAX_RANKS,
        node_series: str = OWNER,
    ) -> None:
        self.stale_after_s = stale_after_s
        self.max_ranks = max_ranks
        #: Which of the other nodes' series the instruments report (:data:`NODE_SERIES`).
        self.node_series = node_series
        self._lock = threading.Lock()
        self._gpus: tuple[GpuSample, ...] = ()
        self._host: HostSample | None = None
        self._ports: tuple[PortSample, ...] = ()
        self._job: TrainingSample | None = None
        self._job_at = 0.0
        self._ranks: dict[int, RankSample] = {}
        #: When each rank was last reported (the same keys in the same order as ``_ranks``).
        self._rank_at: dict[int, float] = {}
        #: The parts of a rank's entry (:data:`~trainpulse_otel.samples.RANK_PARTS`) some held entry may carry.
        self._parts_held: frozenset[str] = frozenset()
        #: Each rank's latest stack, until its next heartbeat without one (the rank moved on).
        self._stacks: dict[int, RankStack] = {}
        self._training: TrainingSample | None = None
        self._training_changes = 0
        self._training_merged_at = 0
        self._version = 0
        self._observed: tuple[int, Observations] | None = None
        self._xids: XidTotals = {}
        self._xid_counts: tuple[XidCount, ...] = ()
        self._losses: deque[LossPoint] = deque(maxlen=MAX_PENDING_LOSSES)
        self._events: deque[LogEvent] = deque(maxlen=MAX_PENDING_EVENTS)
        self._nodes = NodeTable()

    @property
    def version(self) -> int:
        """Increases on every change; lets readers cache what they derive."""
        return self._version

    def put(self, collected: Collected, now: float) -> None:
        """Store what a collector saw; parts it does not see are left as they are.

        Each GPU sample's ``xid_errors`` (the codes since that collector's
        previous sample) are added to the running XID totals here, once per
        collection, so a scrape or a frame read in between never counts one twice.
        """
        with self._lock:
            if collected.gpus is not None:
                self._gpus = collected.gpus
                self._count_xids(collected.gpus)
            if collected.host is not None:
                self._host = collected.host
            if collected.ports is not None:
                self._ports = collected.ports
            self._changed()
        if collected.training is not None:
            self.put_training(collected.training, now)
        for report in collected.reports or ():
            self.put_training(report, now)
        if collected.events:
            self.put_events(collected.events)
        for report in collected.nodes or ():
            self.put_node(report, now)

    def put_events(self, events: Sequence[LogEvent]) -> None:
        """Queue failures the job's output told until the next frame drains them (:meth:`drain_events`)."""
        with self._lock:
            self._events.extend(events)

    def put_node(self, report: NodeReport, now: float) -> None:
        """Store what another node of the job sent (a job daemon's view): its GPUs, host, XID totals and ranks."""
        with self._lock:
            training = self._nodes.put(report, now)
            self._changed()
        if training is not None:
            self.put_training(training, now)

    def holds_nodes(self) -> bool:
        """Whether other nodes of the job are held (this is a job daemon's view)."""
        return bool(self._nodes)

    def rank_count(self) -> int:
        """How many ranks the training view holds."""
        return len(self._ranks)

    def nodes(self) -> tuple[NodeSample, ...]:
        """The job's other nodes as last heard from, sorted by hostname."""
        with self._lock:
            return self._nodes.nodes()

    def put_training(self, sample: TrainingSample, now: float) -> None:
        """Merge one training report received at ``now``.

        A report without ``timestamp`` is stamped with ``now``. A report that
        carries only ranks updates those ranks and keeps the job-level view.
        At most ``max_ranks`` ranks are kept; the least recently reported go first.
        The merged view is built when it is next read (once per tick), not per
        report: ingest stays cheap however many ranks there are.
        """
        with self._lock:
            if sample.ranks:
                self._put_ranks(sample.ranks, now)
            if len(self._ranks) > self.max_ranks:
                self._forget_oldest_ranks()
            if self._job is None or has_job_measurement(sample):
                self._job = with_job_description(sample, self._job)
                self._job_at = now
            self._losses.extend(loss_points(sample, now))
            self._training_changes += 1
            self._changed()

    def _put_ranks(self, ranks: Sequence[RankSample], now: float) -> None:
        """Merge a report's ranks by rank (call under the lock).

        A rank takes a part from its held entry (:func:`merged_rank`) only when it does not carry that part and
        the held entry — or an earlier entry of the same report — does. When no part of the report can be
        taken so (the usual report, whose ranks all carry the same parts), the ranks are stored as they came:
        at 4,096 ranks the per-rank merge was half the frame's cost.
        """
        if self._stacks or any(map(is_not, map(_RANK_STACK, ranks), repeat(None))):
            ranks = self._take_stacks(ranks)
        every, some = carried_parts(ranks)
        held = self._parts_held
        numbers = list(map(_RANK_NUMBER, ranks))
        if any(part not in every and (part in held or part in some) for part in RANK_PARTS):
            known = self._ranks
            for number, rank in zip(numbers, ranks, strict=True):
                old = known.get(number)
                known[number] = rank if old is None else merged_rank(old, rank)
        else:
            self._ranks.update(zip(numbers, ranks, strict=True))
        self._rank_at.update(zip(numbers, repeat(now)))
        if not some <= held:
            self._parts_held = held | some

    def _take_stacks(self, ranks: Sequence[RankSample]) -> tuple[RankSample, ...]:
        """Keep the stacks ``ranks`` carry, drop those of ranks whose heartbeat came without one (call under the
        lock); the ranks without their stacks: a stack has no point, it never reaches the instruments."""
        out = []
        for rank in ranks:
            if rank.stack is not None:
                self._stacks[rank.rank] = RankStack(rank.rank, rank.global_step, rank.phase, rank.stack)
                rank = _WITHOUT_STACK(rank, None)
            elif rank.phase is not None:
                self._stacks.pop(rank.rank, None)
            out.append(rank)
        return tuple(out)

    def stacks(self) -> tuple[RankStack, ...]:
        """The latest stack of each rank that sent one and has not moved on since, by rank."""
        with self._lock:
            held = self._stacks
            return tuple(held[r] for r in sorted(held)) if held else ()

    def forget_training(self) -> None:
        """Drop the training view and every rank (another source takes over the job's reports)."""
        with self._lock:
            self._job = None
            self._ranks.clear()
            self._rank_at.clear()
            self._stacks.clear()
            self._parts_held = frozenset()
            self._training_changes += 1
            self._changed()

    def drain_losses(self) -> tuple[LossPoint, ...]:
        """Every loss point reported since the previous drain (once per frame): the frame keeps only the
        newest report, so without these a one-step spike or NaN between two ticks would never be judged."""
        with self._lock:
            points = tuple(self._losses)
            self._losses.clear()
        return points

    def drain_events(self) -> tuple[LogEvent, ...]:
        """Every failure event queued since the previous drain (once per frame), oldest first."""
        with self._lock:
            events = tuple(self._events)
            self._events.clear()
        return events

    def expire(self, now: float) -> None:
        """Forget training reports and ranks not refreshed within ``stale_after_s``."""
        horizon = now - self.stale_after_s
        with self._lock:
            stale_ranks = self._reported_before(horizon)
            stale_job = self._job is not None and self._job_at < horizon
            if self._nodes.expire(now):
                self._changed()
            if not stale_ranks and not stale_job:
                return
            self._forget_ranks(stale_ranks)
            if stale_job:
                self._job = None
            self._training_changes += 1
            self._changed()

    def current(self) -> Collected:
        """The newest samples, training merged with its ranks; the GPUs are this node's, then the other nodes'."""
        with self._lock:
            return Collected(
                gpus=self._all_gpus(), host=self._host, training=self._merged_training(), ports=self._all_ports()
            )

    def xid_counts(self) -> tuple[XidCount, ...]:
        """XIDs seen per GPU and code since this store was created, sorted; lost GPUs keep theirs.
        Other nodes' totals follow this node's, as their daemons counted them."""
        with self._lock:
            return self._all_xid_counts()

    def _all_gpus(self) -> tuple[GpuSample, ...]:
        remote = self._nodes.gpus()
        return self._gpus + remote if remote else self._gpus

    def _all_ports(self) -> tuple[PortSample, ...]:
        remote = self._nodes.ports()
        return self._ports + remote if remote else self._ports

    def _all_xid_counts(self) -> tuple[XidCount, ...]:
        remote = self._nodes.xid_counts()
        return self._xid_counts + remote if remote else self._xid_counts

    def _count_xids(self, gpus: tuple[GpuSample, ...]) -> None:
        """Fold the samples' new XID codes into the totals (call under the lock)."""
        if count_xid_events(self._xids, gpus):
            self._xid_counts = xid_counts(self._xids)

    def observations(self) -> Observations:
        """The measurement points for the current samples, computed once per change.

        With other nodes held and ``node_series`` ``owner``, only the series this daemon owns: its GPUs, host,
        XID totals and the ranks not on another node, the job-level report, and each other node's summary
        (``node.*``); those nodes' GPUs, hosts and ranks are their own daemons' to export."""
        with self._lock:
            cached = self._observed
            if cached is not None and cached[0] == self._version:
                return cached[1]
            version, host, training, nodes = self._version, self._host, self._merged_training(), self._nodes.nodes()
            if nodes and self.node_series == OWNER:
                gpus, xids, training = self._gpus, self._xid_counts, _owned_ranks(training, nodes)
                ports = self._ports
            else:
                gpus, xids, ports = self._all_gpus(), self._all_xid_counts(), self._all_ports()
        node_hosts = not nodes or self.node_series != OWNER
        observed = observe(gpus, host, training, xids, nodes, node_hosts=node_hosts, ports=ports)
        with self._lock:
            self._observed = (version, observed)
        return observed

    def _forget_oldest_ranks(self) -> None:
        """Keep the ``max_ranks`` most recently reported ranks: memory stays bounded
        even when reports name ever new rank numbers."""
        by_age = sorted(self._rank_at, key=self._rank_at.__getitem__)
        self._forget_ranks(by_age[: len(self._ranks) - self.max_ranks])

    def _reported_before(self, horizon: float) -> list[int]:
        """The ranks last reported before ``horizon`` (call under the lock); one C-level pass when there are none."""
        reported = self._rank_at
        if not reported or min(reported.values()) >= horizon:  # report times are finite: the clock's or a trace's
            return []
        return [r for r, at in reported.items() if at < horizon]

    def _forget_ranks(self, numbers: list[int]) -> None:
        """Drop these ranks' entries (call under the lock); once none is left, no part is held."""
        for r in numbers:
            del self._ranks[r]
            del self._rank_at[r]
            self._stacks.pop(r, None)
        if not self._ranks:
            self._parts_held = frozenset()

    def _merged_training(self) -> TrainingSample | None:
        """The job-level report with every live rank (call under the lock); rebuilt after a change."""
        if self._training_merged_at != self._training_changes:
            self._training = self._merge()
            self._training_merged_at = self._training_changes
        return self._training

    def _merge(self) -> TrainingSample | None:
        numbers = list(self._ranks)
        in_order = sorted(numbers)
        held = self._ranks
        # ranks are usually held in rank order (a report updates its ranks in place): then no lookups
        ranks = tuple(held.values()) if numbers == in_order else tuple(map(held.__getitem__, in_order))
        if self._job is None:
            return TrainingSample(ranks=ranks) if ranks else None
        stamp = self._job.timestamp if self._job.timestamp is not None else self._job_at
        return _WITH_STAMP_AND_RANKS(self._job, stamp, ranks)

    def _changed(self) -> None:
        self._version += 1


def _owned_ranks(training: TrainingSample | None, nodes: Sequence[NodeSample]) -> TrainingSample | None:
    """``training`` without the ranks another node's daemon reported (theirs to export)."""
    if training is None:
        return None
    others = {node.hostname for node in nodes}
    ranks = tuple(r for r in training.ranks if r.hostname not in others)
    return training if len(ranks) == len(training.ranks) else _WITH_RANKS(training, ranks)


#: The job-level report with its time and the live ranks (a slot copy: every changed tick makes one).
_WITH_STAMP_AND_RANKS = field_replacer(TrainingSample, "timestamp", "ranks")
_WITH_RANKS = field_replacer(TrainingSample, "ranks")
#: Reads a rank entry's number in one C call (this runs over every rank of every report).
_RANK_NUMBER = attrgetter("rank")
_RANK_STACK = attrgetter("stack")
_WITHOUT_STACK = field_replacer(RankSample, "stack")
