"""The ``sim`` collector: a :class:`~.node.SimulatedNode` driven by the daemon's clock.

It is where the pure node meets the running engine: it anchors the node's
time at the first tick, moves the scenario's fault to ``-onset``, and stands
the simulated training loop down while real training reports arrive
(:mod:`.handover`), saying so in the log when that starts and when it ends.
"""

from __future__ import annotations

import logging
from typing import Any

from ...config.durations import format_duration
from ..base import Collected
from .combine import scenario_named
from .handover import RealReports
from .job import NODE_GPUS
from .node import SimulatedNode
from .scenarios import Scenario

log = logging.getLogger(__name__)


class SimCollector:
    """The simulated node as a collector.

    The first ``collect(now)`` anchors the node at ``now``; each call samples it
    at ``now - first_now``, so timestamps are the daemon's own and ``onset_s``
    counts from that first tick (the start of a warm-up, where there is one).
    ``onset_s=None`` keeps the scenario's own onset. ``nodes``/``node_rank``: this is
    node ``node_rank`` of a job across ``nodes`` nodes; ``fault_node``: the node whose GPUs the scenario's
    faults hit (None: this one) (:mod:`.placement`).
    """

    name = "sim"

    def __init__(
        self,
        scenario: str | Scenario = "healthy",
        seed: int = 0,
        interval_s: float = 1.0,
        gpus: int = NODE_GPUS,
        ranks: int | None = None,
        *,
        onset_s: float | None = None,
        reports: RealReports | None = None,
        nodes: int = 1,
        node_rank: int = 0,
        fault_node: int | None = None,
    ) -> None:
        chosen = scenario_named(scenario) if isinstance(scenario, str) else scenario
        if onset_s is not None:
            chosen = chosen.starting_at(onset_s)
        self.node = SimulatedNode(
            chosen, seed, gpus, ranks, interval_s, nodes=nodes, node_rank=node_rank, fault_node=fault_node
        )
        self.seed = seed
        self.reports = reports
        self._first_now: float | None = None
        self._stood_down = False

    def collect(self, now: float) -> Collected:
        """Sample the simulated node at ``now`` (unix seconds); no training report while real ones arrive."""
        if self._first_now is None:
            self._first_now = self.node.start_ts = now
        sample = self.node.sample(now - self._first_now)
        if self._real_reports_arriving(now):
            return Collected(gpus=sample.gpus, host=sample.host)
        return sample

    def _real_reports_arriving(self, now: float) -> bool:
        """Whether the simulated training loop stands down this tick; logs each change."""
        reports = self.reports
        arriving = reports is not None and reports.active(now)
        if reports is not None and arriving != self._stood_down:
            self._stood_down = arriving
            if arriving:
                log.info(
                    "real training reports are arriving: the simulated training loop stands down "
                    "(simulated GPUs and host go on)"
                )
            else:
                log.info(
                    "no real training report for %s: the simulated training loop resumes",
                    format_duration(reports.stale_after_s),
                )
        return arriving

    def describe(self) -> dict[str, Any]:
        """What this collector simulates, for logs and the snapshot."""
        node = self.node
        return {
            "name": self.name,
            "scenario": node.scenario.name,
            "onset_s": node.scenario.onset_s,
            "seed": self.seed,
            "gpus": node.gpus,
            "ranks": node.ranks,
            "nodes": node.placement.nodes,
            "node_rank": node.placement.node_rank,
            "fault_node": node.placement.fault_node,
            "hostname": node.hostname,
        }

    def close(self) -> None:
        """Nothing to release."""
