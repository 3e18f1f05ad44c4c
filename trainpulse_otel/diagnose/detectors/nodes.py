"""``node_unreachable``: a node of the job stopped sending its telemetry.

A job daemon hears every node of the job (OTLP from node daemons). Each node
is judged against its own report interval — the median gap between its recent
exports (:class:`~trainpulse_otel.samples.NodeSample`) — so a node exporting
every 10 s is not late after 3 s. Silent for three of its intervals (the
contract's rule) it is raised, critical, at once: a node that stops sending
has crashed, lost its network or been fenced, and the job's ranks on it have
stopped with it. The score is the missed intervals over three, so it holds
while the node stays silent and clears a few seconds after it speaks again.
Evidence: when it was last heard, how long it has been silent, its usual
interval, the ranks the job places on it (with their last completed step) and
its GPUs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...samples import NODE_SILENT_INTERVALS, NodeSample, RankSample
from ..spec import JOB, SignalSpec
from ..thresholds import CONVENTION, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, Finding, Policy
from .base import SCORE_CAP, BaseDetector

NODE_UNREACHABLE = SignalSpec(
    "node_unreachable",
    "a node of the job stopped sending its telemetry",
    JOB,
    0.24,
    "stall",
    policy=Policy(raise_evidence=1.0, min_observations=1, hold=0.75, clear_after_s=5.0, stale_after_s=60.0),
)

#: Ranks listed in the evidence at most (a node holds 8 in most jobs; the count is always given).
MAX_LISTED_RANKS = 16


class NodeUnreachable(BaseDetector):
    """A node of the job silent for three of its own report intervals."""

    name = "node_unreachable"
    signals = (NODE_UNREACHABLE,)
    knobs = (
        Knob(
            "silent_intervals",
            float(NODE_SILENT_INTERVALS),
            TIMES,
            CONVENTION,
            "a node silent for this many of its own report intervals is gone (the contract's three; a node "
            "exporting every 10 s is not late after 3 s)",
            1,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self.silent_intervals = self.thresholds.silent_intervals

    def update(self, tick: Tick) -> list[Finding] | None:
        nodes = tick.frame.nodes
        if not nodes:
            return None
        out = []
        floor = self.report_floor
        held: JobByNode | None = None  # gathered once per tick, and only when some node is judged
        for node in nodes:
            score = node.missed_reports(tick.ts) / self.silent_intervals
            if score >= floor:
                held = held or JobByNode.of(tick)
                out.append(self._finding(node, tick, min(score, SCORE_CAP), held))
        return out

    def _finding(self, node: NodeSample, tick: Tick, score: float, held: JobByNode) -> Finding:
        silent = max(0.0, tick.ts - node.last_seen)
        ranks = held.ranks.get(node.hostname, [])
        evidence: dict[str, Any] = {
            "last_seen": node.last_seen,
            "silent_s": round(silent, 1),
            "report_interval_s": node.report_interval_s,
            "missed_reports": round(node.missed_reports(tick.ts), 1),
            "ranks": [r.rank for r in ranks[:MAX_LISTED_RANKS]],
            "rank_count": len(ranks),
            "gpu_count": held.gpu_counts.get(node.hostname, 0),
        }
        steps = [r.global_step for r in ranks if r.global_step is not None]
        if steps:
            evidence["last_global_step"] = max(steps)
        on_it = f" ({len(ranks)} rank{'s' if len(ranks) != 1 else ''} of the job on it)" if ranks else ""
        message = (
            f"node {node.hostname} has sent nothing for {silent:.0f} s, {evidence['missed_reports']:.0f} of its "
            f"{node.report_interval_s:.1f} s report intervals{on_it}"
        )
        return Finding(NODE_UNREACHABLE.name, score, CRITICAL, message, {"hostname": node.hostname}, evidence)


@dataclass(frozen=True)
class JobByNode:
    """The tick's ranks (in report order) and GPU counts by hostname: one pass over the job, not one per node."""

    ranks: dict[str | None, list[RankSample]]
    gpu_counts: Counter[str | None]

    @staticmethod
    def of(tick: Tick) -> JobByNode:
        ranks: dict[str | None, list[RankSample]] = {}
        for rank in tick.training.ranks if tick.training is not None else ():
            ranks.setdefault(rank.hostname, []).append(rank)
        return JobByNode(ranks, Counter(g.node for g in tick.gpus))
