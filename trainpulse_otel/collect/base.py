"""The one small interface every collector implements.

A collector reads one part of the world (NVML, nvidia-smi, the host, the
simulator) and returns what it saw as a :class:`Collected` bundle. Anything it
cannot see is ``None`` — missing hardware is a normal state, not an exception.
Collectors never talk to OpenTelemetry: the telemetry stage reads their latest
samples through observable instruments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..samples import GpuSample, HostSample, NodeReport, TrainingSample

if TYPE_CHECKING:
    from ..config import Settings


@dataclass(frozen=True, slots=True)
class Collected:
    """What one collection saw; ``None`` means "this collector does not see that".

    ``nodes``: what other nodes of the job said, for a collector that hears them (a job daemon's
    simulator; OTLP ingest reaches the same store through the engine).
    """

    gpus: tuple[GpuSample, ...] | None = None
    host: HostSample | None = None
    training: TrainingSample | None = None
    nodes: tuple[NodeReport, ...] | None = None

    def merge(self, other: Collected) -> Collected:
        """Combine two bundles; the other's non-None parts win."""
        return Collected(
            gpus=other.gpus if other.gpus is not None else self.gpus,
            host=other.host if other.host is not None else self.host,
            training=other.training if other.training is not None else self.training,
            nodes=other.nodes if other.nodes is not None else self.nodes,
        )


@runtime_checkable
class Collector(Protocol):
    """Anything with ``collect()``; ``name`` says what it reads, for logs and the snapshot."""

    name: str

    def collect(self, now: float) -> Collected:
        """Read the world once. ``now`` is the tick's timestamp (unix seconds)."""
        ...

    def close(self) -> None:
        """Release handles (NVML shutdown, subprocesses)."""
        ...


class CollectorFactory(Protocol):
    """What a ``trainpulse.collectors`` entry point names: Settings in, an open Collector out.

    Raising (the hardware is not there, a setting is wrong) makes the
    composition root log the reason and go on without that collector.
    """

    def __call__(self, settings: Settings) -> Collector: ...
