"""A job's other nodes as a job daemon hears them: what one node sent (:class:`NodeReport`), the node as last
heard from (:class:`NodeSample`), and the verdict a judging node's daemon sends along (:class:`NodeSignal`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .model import GpuSample, HostSample, TrainingSample, XidCount
from .ports import PortSample

#: A node of a job that has sent nothing for this many of its own report intervals has stopped sending (the
#: contract's ``node_unreachable``); its last state stays visible, marked stale.
NODE_SILENT_INTERVALS = 3.0


@dataclass(frozen=True, slots=True)
class NodeSignal:
    """A signal a node's own daemon has active, as its export names it (``trainpulse.signal.subject``): the
    subject's ``hostname`` is the node's, ``gpu_index`` and ``rank`` integers where it names them."""

    name: str
    severity: str
    subject: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class NodeSample:
    """One node of a job as the job daemon last heard from it.

    ``last_seen`` is when its telemetry last arrived (unix seconds, the job
    daemon's clock) and ``report_interval_s`` how often it usually arrives (the
    median gap between its exports; ``None`` until two have arrived): a node
    silent for several of its own intervals has stopped sending.

    ``signals`` is None for a node whose daemon does not judge (an OTel-only
    trainer, a relay): the job daemon judges its GPUs and host itself. A judging
    node's daemon sends its verdict (``signals``, its active GPU and host
    signals); the job daemon takes that verdict and holds the node's GPUs
    (``gpus``) only to show them.
    """

    hostname: str
    last_seen: float
    report_interval_s: float | None = None
    host: HostSample | None = None
    signals: tuple[NodeSignal, ...] | None = None
    gpus: tuple[GpuSample, ...] = ()

    @property
    def judged(self) -> bool:
        """Whether the node's own daemon judges its GPUs and host (it sends its verdict)."""
        return self.signals is not None

    def missed_reports(self, ts: float) -> float:
        """How many of its intervals the node has been silent at ``ts`` (0 until its interval is known)."""
        interval = self.report_interval_s
        return max(0.0, ts - self.last_seen) / interval if interval else 0.0

    def stale(self, ts: float) -> bool:
        """Silent for :data:`NODE_SILENT_INTERVALS` of its intervals: what it last said may no longer hold."""
        return self.missed_reports(ts) >= NODE_SILENT_INTERVALS


@dataclass(frozen=True, slots=True)
class NodeReport:
    """What one node sent in one export (OTLP ingest from a node daemon or an OTel-emitting trainer).

    Any part may be absent. ``xid_counts`` are the node's own running totals
    (its daemon counts them), taken as they are; ``training`` carries the
    node's ranks (global rank numbers) and, from the job's leading node, the
    job-level report. ``signals`` is the node daemon's verdict (its active
    signals; None: the export carried none, the node does not judge).
    """

    hostname: str
    gpus: tuple[GpuSample, ...] | None = None
    host: HostSample | None = None
    training: TrainingSample | None = None
    xid_counts: tuple[XidCount, ...] | None = None
    signals: tuple[NodeSignal, ...] | None = None
    #: The node's InfiniBand/RoCE ports (its daemon reads them from sysfs or a node-exporter).
    ports: tuple[PortSample, ...] | None = None
