"""The one small interface every collector implements.

A collector reads one part of the world (NVML, nvidia-smi, the host, the
simulator) and returns what it saw as a :class:`Collected` bundle. Anything it
cannot see is ``None`` — missing hardware is a normal state, not an exception.
Collectors never talk to OpenTelemetry: the telemetry stage reads their latest
samples through observable instruments. :class:`Collected` itself lives in
:mod:`trainpulse_otel.samples.collected` (the stages after collection speak it
too) and is re-exported here, where collector plugins import it from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..samples.collected import Collected

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["Collected", "Collector", "CollectorFactory"]


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
