"""What one dashboard frame is drawn from: the latest snapshot, the ring of recent frames, the link.

Panels read the typed :class:`~trainpulse_otel.publish.snapshot.Snapshot`
only — built by a local engine, or read from a daemon's ``/v1/snapshot`` by
``Snapshot.from_dict`` — so the dashboard works the same in both and never
reaches into collectors or detectors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from ..diagnose.types import Diagnosis, Signal
from ..publish.snapshot import Snapshot
from ..samples import Frame, GpuSample, HostSample, TrainingSample
from .job import JobView

#: How many frames the sparklines look back over (4 minutes at 1 s).
HISTORY_SIZE = 240
NO_DIAGNOSIS = Diagnosis()


class History:
    """A small client-side ring of recent frames, for sparklines.

    Filled from the source's history (a local warm-up, a daemon's
    ``/v1/history``) and then from each snapshot. A daemon polled faster than
    it ticks returns the same snapshot twice: a frame with the timestamp of the
    newest one replaces it instead of counting twice.
    """

    def __init__(self, size: int = HISTORY_SIZE) -> None:
        self._ring: deque[Frame] = deque(maxlen=size)

    @property
    def size(self) -> int:
        """The bound: how many frames the ring keeps."""
        return self._ring.maxlen or 0

    @property
    def newest_ts(self) -> float | None:
        return self._ring[-1].ts if self._ring else None

    def add(self, snapshot: Snapshot) -> None:
        """Keep the snapshot's frame (nothing before the first tick)."""
        frame = snapshot.frame
        if frame is not None:
            self.add_frame(frame)

    def add_frame(self, frame: Frame) -> None:
        if self._ring and self._ring[-1].ts == frame.ts:
            self._ring[-1] = frame
        else:
            self._ring.append(frame)

    def extend(self, frames: Iterable[Frame]) -> None:
        """Frames oldest first (a daemon's history); those older than the newest kept are already here."""
        for frame in frames:
            newest = self.newest_ts
            if newest is None or frame.ts >= newest:
                self.add_frame(frame)

    def __len__(self) -> int:
        return len(self._ring)

    def __iter__(self) -> Iterator[Frame]:
        return iter(self._ring)

    def last_training(self) -> tuple[float | None, TrainingSample | None]:
        """The newest frame that carried a training report: its timestamp and the report."""
        for frame in reversed(self._ring):
            if frame.training is not None:
                return frame.ts, frame.training
        return None, None

    def training_series(self, read: Callable[[TrainingSample], float | None]) -> list[float | None]:
        """One training field (``read``) across the ring, None where a frame had no report."""
        return [None if f.training is None else read(f.training) for f in self._ring]


@dataclass(frozen=True)
class Link:
    """Where snapshots come from, and whether that is working right now.

    ``state`` is ``local``, ``connecting``, ``connected``, ``disconnected`` or
    ``reconnected``; ``changed_at`` is the wall time of the last change, so the
    header can say for how long.
    """

    source: str
    state: str
    changed_at: float
    error: str | None = None
    last_ok: float | None = None

    @property
    def remote(self) -> bool:
        return self.state != "local"


@dataclass(frozen=True)
class View:
    """Everything a frame needs; ``wall`` is the wall clock at render time.

    ``interactive``: keys work (the live loop); a one-off frame (``top -once``,
    a pipe) shows no key hints.
    """

    snapshot: Snapshot | None
    history: History
    link: Link
    wall: float
    paused: bool = False
    interactive: bool = True

    @property
    def now(self) -> float:
        """The snapshot's own clock (signal ages are measured on it), else the wall clock."""
        ts = self.snapshot.timestamp if self.snapshot else None
        return ts if ts is not None else self.wall

    @property
    def mode(self) -> str | None:
        return self.snapshot.mode if self.snapshot else None

    @property
    def uptime_s(self) -> float | None:
        return self.snapshot.uptime_s if self.snapshot else None

    @property
    def gpus(self) -> tuple[GpuSample, ...]:
        return self.snapshot.gpus if self.snapshot else ()

    @property
    def host(self) -> HostSample | None:
        return self.snapshot.host if self.snapshot else None

    @property
    def training(self) -> TrainingSample | None:
        return self.snapshot.training if self.snapshot else None

    @cached_property
    def job(self) -> JobView | None:
        """A job daemon's nodes, judged once a frame for the node strip and the GPU panel (None: one node)."""
        return JobView.of(self.snapshot)

    @property
    def diagnosis(self) -> Diagnosis:
        return self.snapshot.diagnosis if self.snapshot else NO_DIAGNOSIS

    def signals(self, name: str | None = None) -> list[Signal]:
        """Active signals (of one name), critical first, then oldest first."""
        found = [s for s in self.diagnosis.signals if name is None or s.name == name]
        return sorted(found, key=lambda s: (s.severity != "critical", s.since))
