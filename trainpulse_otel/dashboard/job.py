"""The job across nodes as ``top`` shows it: each node's state, the node the top cause names, the worst node.

Why one place: the node strip colours every node by it and the GPU panel shows the worst node's GPUs, so
both must agree; :attr:`~.view.View.job` computes it once per frame from the snapshot alone (a job
daemon's ``nodes``, its GPUs tagged with ``node``, the diagnosis' subjects).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..publish.snapshot import Snapshot
from ..samples import GpuSample
from .grades import CRITICAL, OK, WARNING, gpu_level


@dataclass(frozen=True, slots=True)
class NodeState:
    """One node of the job, judged for the strip."""

    hostname: str
    level: int  # OK, WARNING or CRITICAL: the worst of its GPUs and of the signals naming it
    stale: bool  # silent for three of its intervals: what is shown is its last state
    cause: bool  # the top root cause names it
    gpus: int
    silent_s: float | None  # since its telemetry last arrived (the snapshot's clock)


@dataclass(frozen=True, slots=True)
class JobView:
    """Every node of the job, sorted by hostname."""

    nodes: tuple[NodeState, ...]

    @classmethod
    def of(cls, snapshot: Snapshot | None) -> JobView | None:
        """The job view of a job daemon's snapshot; None for one node's (no ``nodes``)."""
        if snapshot is None or not snapshot.nodes:
            return None
        gpus: dict[str | None, list[GpuSample]] = {}
        for gpu in snapshot.gpus:
            gpus.setdefault(gpu.node, []).append(gpu)
        named: dict[str, int] = {}
        for signal in snapshot.diagnosis.signals:
            severity = CRITICAL if signal.severity == "critical" else WARNING
            for hostname in subject_hosts(signal.subject):
                named[hostname] = max(named.get(hostname, OK), severity)
        causes = snapshot.diagnosis.root_causes
        blamed = set(subject_hosts(causes[0].subject)) if causes else set()
        ts = snapshot.timestamp
        return cls(
            tuple(
                NodeState(
                    n.hostname,
                    max(named.get(n.hostname, OK), max(map(gpu_level, gpus.get(n.hostname, ())), default=OK)),
                    ts is not None and n.stale(ts),
                    n.hostname in blamed,
                    len(gpus.get(n.hostname, ())),
                    None if ts is None else max(0.0, ts - n.last_seen),
                )
                for n in snapshot.nodes
            )
        )

    def worst(self) -> NodeState:
        """The node to show in detail: the one the top cause names, else the worst (the first of equals)."""
        return max(self.nodes, key=_badness)


def _badness(node: NodeState) -> tuple[bool, int, bool]:
    """How bad a node is: named by the top cause, then its level, then stale."""
    return node.cause, node.level, node.stale


def subject_hosts(subject: Mapping[str, Any]) -> Iterable[str]:
    """The hostnames a signal's or cause's subject names (``hostname``: one, or a list of several)."""
    hostname = subject.get("hostname")
    if isinstance(hostname, str):
        return (hostname,)
    return tuple(h for h in hostname if isinstance(h, str)) if isinstance(hostname, list) else ()
