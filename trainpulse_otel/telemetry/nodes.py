"""The other nodes of a job, as a job daemon hears them: each node's latest GPUs and host, and when it spoke.

A job daemon receives node telemetry (OTLP from node daemons, or a job trace
with ``node`` on its lines). :class:`NodeTable` keeps, per node, the newest
GPU list (each GPU tagged with its node), host sample, InfiniBand ports and XID totals, plus the
arrival times its liveness is judged from: the median gap between arrivals is
the node's own report interval, so a node exporting every 10 s and one
exporting every second are both judged against themselves.

A node whose daemon sends its verdict (its active signals, :mod:`~trainpulse_otel.receive.verdict`) judges
its own GPUs and host: its GPUs and XID totals stay out of the job's frame (:meth:`NodeTable.gpus`), held
only to be shown, and its verdict travels on its :class:`~trainpulse_otel.samples.NodeSample`.

The training part of a node's report is not kept here: its ranks merge into the
job's training view like any other rank report (:class:`~.latest.LatestSamples`).
Only the job's *leading* node — the one whose ranks include global rank 0, or
the first to send job-level measurements — may replace the job-level report,
so N nodes that each carry the job's step time do not take turns overwriting it
(or count every loss N times). The leader is replaced when it goes silent.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import replace

from ..samples import (
    GpuSample,
    HostSample,
    NodeReport,
    NodeSample,
    NodeSignal,
    PortSample,
    TrainingSample,
    XidCount,
    has_job_measurement,
)
from .xids import count_xid_events, xid_counts

#: Arrivals closer than this are parts of one export (a gateway may split a batch), not two reports.
SAME_EXPORT_S = 0.25
#: Gaps kept per node for its report interval (their median).
GAPS_KEPT = 9
#: A node silent this long is forgotten (its last state stays visible, marked stale, until then).
FORGET_AFTER_S = 3600.0
#: The most nodes kept; the longest silent go first.
MAX_NODES = 4096
#: The leading node is replaced once it has been silent for this many of its intervals.
LEADER_SILENT_INTERVALS = 3.0


class _Node:
    __slots__ = ("_interval", "gaps", "gpus", "host", "last_seen", "ports", "signals", "xid_counts")

    def __init__(self, now: float) -> None:
        self.gpus: tuple[GpuSample, ...] = ()  # by index
        #: The node daemon's verdict, its active signals (None: it sent none, so the job daemon judges the node).
        self.signals: tuple[NodeSignal, ...] | None = None
        self.host: HostSample | None = None
        self.xid_counts: tuple[XidCount, ...] = ()
        self.ports: tuple[PortSample, ...] = ()  # tagged with the node
        self.last_seen = now
        self.gaps: deque[float] = deque(maxlen=GAPS_KEPT)
        self._interval: float | None = None

    def heard(self, now: float) -> None:
        gap = now - self.last_seen
        if gap >= SAME_EXPORT_S:
            self.gaps.append(gap)
            self._interval = statistics.median(self.gaps)  # once per gap, not per read (every tick, every node)
        self.last_seen = max(self.last_seen, now)

    def interval(self) -> float | None:
        return self._interval

    def silent_for(self, now: float, intervals: float) -> bool:
        interval = self.interval()
        return interval is not None and now - self.last_seen > intervals * interval


class NodeTable:
    """The job's other nodes (not thread-safe: :class:`~.latest.LatestSamples` holds the lock)."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._leader: str | None = None
        self._gpus: tuple[GpuSample, ...] = ()
        self._xid_counts: tuple[XidCount, ...] = ()
        self._ports: tuple[PortSample, ...] = ()

    def put(self, report: NodeReport, now: float) -> TrainingSample | None:
        """Keep what ``report`` says of its node; returns its training part for the job view (or None).

        The returned report's ranks carry the node's hostname where they did
        not name one; its job-level measurements are dropped unless the node
        leads the job.
        """
        hostname = report.hostname
        node = self._nodes.get(hostname)
        if node is None:
            node = self._nodes[hostname] = _Node(now)
            if len(self._nodes) > MAX_NODES:
                self._forget(min(self._nodes, key=lambda h: self._nodes[h].last_seen))
        else:
            node.heard(now)
        judged = node.signals is not None  # its GPUs and XIDs are in none of the job's lists: nothing to redo
        if report.gpus is not None:
            node.gpus = tuple(sorted((g.on_node(hostname) for g in report.gpus), key=_index))
            if report.xid_counts is None and _fold_xids(node, hostname) and not judged:
                self._xid_counts = ()
            if not judged:
                self._gpus = ()
        if report.host is not None:
            node.host = report.host
        if report.ports is not None:
            node.ports = tuple(p if p.node == hostname else replace(p, node=hostname) for p in report.ports)
            self._ports = ()
        if report.signals is not None:
            if not judged:  # the node judges from now on: its GPUs, XIDs and ports leave the job's frame
                self._gpus, self._xid_counts, self._ports = (), (), ()
            node.signals = report.signals
        if report.xid_counts is not None:
            node.xid_counts = tuple(x if x.node == hostname else replace(x, node=hostname) for x in report.xid_counts)
            if not judged:
                self._xid_counts = ()
        if report.training is None:
            return None
        return self._job_part(hostname, _with_hostname(report.training, hostname), now)

    def _job_part(self, hostname: str, training: TrainingSample, now: float) -> TrainingSample:
        """``training`` as the job view takes it from this node: job-level fields only from the leader."""
        leads_rank0 = any(r.rank == 0 for r in training.ranks)
        leader = self._nodes.get(self._leader) if self._leader is not None else None
        if leader is None or self._leader == hostname or leads_rank0 or leader.silent_for(now, LEADER_SILENT_INTERVALS):
            if has_job_measurement(training):
                self._leader = hostname
            return training
        return TrainingSample(ranks=training.ranks)

    def expire(self, now: float) -> bool:
        """Forget nodes silent for :data:`FORGET_AFTER_S`; True when one was."""
        gone = [h for h, n in self._nodes.items() if now - n.last_seen > FORGET_AFTER_S]
        for hostname in gone:
            self._forget(hostname)
        return bool(gone)

    def _forget(self, hostname: str) -> None:
        del self._nodes[hostname]
        self._gpus, self._xid_counts, self._ports = (), (), ()
        if self._leader == hostname:
            self._leader = None

    def __len__(self) -> int:
        return len(self._nodes)

    def nodes(self) -> tuple[NodeSample, ...]:
        """Every node, sorted by hostname; a judging node with its verdict and the GPUs it judges itself."""
        return tuple(
            NodeSample(hostname, node.last_seen, node.interval(), node.host)
            if node.signals is None
            else NodeSample(hostname, node.last_seen, node.interval(), node.host, node.signals, node.gpus)
            for hostname, node in sorted(self._nodes.items())
        )

    def gpus(self) -> tuple[GpuSample, ...]:
        """The GPUs the job daemon judges: every node's whose daemon sends no verdict, by node then index
        (cached until a node's GPU list changes)."""
        if not self._gpus and self._nodes:
            self._gpus = tuple(g for _, n in sorted(self._nodes.items()) if n.signals is None for g in n.gpus)
        return self._gpus

    def ports(self) -> tuple[PortSample, ...]:
        """The InfiniBand/RoCE ports the job daemon judges: every node's whose daemon sends no verdict, by node
        (cached until a node's ports change)."""
        if not self._ports and self._nodes:
            self._ports = tuple(p for _, n in sorted(self._nodes.items()) if n.signals is None for p in n.ports)
        return self._ports

    def xid_counts(self) -> tuple[XidCount, ...]:
        """The XID totals of the nodes the job daemon judges."""
        if not self._xid_counts and self._nodes:
            self._xid_counts = tuple(
                x for _, n in sorted(self._nodes.items()) if n.signals is None for x in n.xid_counts
            )
        return self._xid_counts


def _fold_xids(node: _Node, hostname: str) -> bool:
    """Add the XID codes on the node's new GPU samples (a job trace's lines carry them as events) to its totals;
    a node daemon over OTLP sends its totals instead (``NodeReport.xid_counts``)."""
    if not any(g.xid_errors for g in node.gpus):
        return False  # the usual report: no XID, nothing to rebuild
    totals = {(x.gpu_index, x.xid): x.count for x in node.xid_counts}
    if not count_xid_events(totals, node.gpus):
        return False
    node.xid_counts = xid_counts(totals, hostname)
    return True


def _index(gpu: GpuSample) -> int:
    return gpu.index


def _with_hostname(training: TrainingSample, hostname: str) -> TrainingSample:
    """The report with its node's hostname on every rank that names none (the job-level ``hostname``
    stays as sent: it names the daemon's own node, which a job daemon's view has not)."""
    if all(r.hostname is not None for r in training.ranks):
        return training
    return replace(training, ranks=tuple(r if r.hostname else replace(r, hostname=hostname) for r in training.ranks))
