"""What one collection saw: the bundle a collector returns and the latest samples hand back.

It lives with the samples, not with the collectors, so the stages after
collection (telemetry's :class:`~trainpulse_otel.telemetry.latest.LatestSamples`)
speak it without depending on collection; :mod:`trainpulse_otel.collect.base`
re-exports it for collector plugins.
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import LogEvent
from .model import GpuSample, HostSample, TrainingSample
from .nodes import NodeReport
from .ports import PortSample


@dataclass(frozen=True, slots=True)
class Collected:
    """What one collection saw; ``None`` means "this collector does not see that".

    ``nodes``: what other nodes of the job said, for a collector that hears them (a job daemon's
    simulator; OTLP ingest reaches the same store through the engine). ``reports``: every training report
    since the last collection, oldest first, for a collector that reads many (a log follower's iteration
    lines; ``training`` is one report). ``events``: the failures the job's output told since then. ``ports``: the
    host's InfiniBand/RoCE ports (sysfs, a node-exporter scrape).
    """

    gpus: tuple[GpuSample, ...] | None = None
    host: HostSample | None = None
    training: TrainingSample | None = None
    nodes: tuple[NodeReport, ...] | None = None
    reports: tuple[TrainingSample, ...] | None = None
    events: tuple[LogEvent, ...] | None = None
    ports: tuple[PortSample, ...] | None = None

    def merge(self, other: Collected) -> Collected:
        """Combine two bundles; the other's non-None parts win."""
        return Collected(
            gpus=other.gpus if other.gpus is not None else self.gpus,
            host=other.host if other.host is not None else self.host,
            training=other.training if other.training is not None else self.training,
            nodes=other.nodes if other.nodes is not None else self.nodes,
            reports=other.reports if other.reports is not None else self.reports,
            events=other.events if other.events is not None else self.events,
            ports=other.ports if other.ports is not None else self.ports,
        )
