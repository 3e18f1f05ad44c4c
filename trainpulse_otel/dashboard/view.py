"""What one dashboard frame is drawn from: the latest snapshot, the ring, the link.

Panels read snapshots only — the contract's dict, whether it came from a local
engine or a daemon's ``/v1/snapshot`` — so the dashboard works the same in both
and never reaches into collectors or detectors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

Snapshot = Mapping[str, Any]

#: How many snapshots the sparklines look back over (4 minutes at 1 s).
HISTORY_SIZE = 240


class History:
    """A small client-side ring of recent snapshots, for sparklines.

    A daemon polled faster than it ticks returns the same snapshot twice; a
    snapshot with the timestamp of the newest one replaces it instead of
    counting twice.
    """

    def __init__(self, size: int = HISTORY_SIZE) -> None:
        self._ring: deque[Snapshot] = deque(maxlen=size)

    def add(self, snapshot: Snapshot) -> None:
        ts = snapshot.get("timestamp")
        if self._ring and ts is not None and self._ring[-1].get("timestamp") == ts:
            self._ring[-1] = snapshot
        else:
            self._ring.append(snapshot)

    def __len__(self) -> int:
        return len(self._ring)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(self._ring)

    def last_training(self) -> tuple[float | None, Mapping[str, Any] | None]:
        """The newest snapshot that carried a training report: its timestamp and the report."""
        for snapshot in reversed(self._ring):
            if snapshot.get("training"):
                return snapshot.get("timestamp"), snapshot["training"]
        return None, None

    def training_series(self, field: str) -> list[float | None]:
        """One training field across the ring, None where a snapshot had no report."""
        return [((s.get("training") or {}).get(field)) for s in self._ring]


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
        ts = (self.snapshot or {}).get("timestamp")
        return float(ts) if ts is not None else self.wall

    @property
    def gpus(self) -> list[Mapping[str, Any]]:
        return list((self.snapshot or {}).get("gpus") or [])

    @property
    def host(self) -> Mapping[str, Any] | None:
        return (self.snapshot or {}).get("host")

    @property
    def training(self) -> Mapping[str, Any] | None:
        return (self.snapshot or {}).get("training")

    @property
    def diagnosis(self) -> Mapping[str, Any]:
        return (self.snapshot or {}).get("diagnosis") or {}

    def signals(self, name: str | None = None) -> list[Mapping[str, Any]]:
        """Active signals (of one name), critical first, then oldest first."""
        found = [s for s in self.diagnosis.get("signals") or [] if name is None or s.get("name") == name]
        return sorted(found, key=lambda s: (s.get("severity") != "critical", s.get("since") or 0.0))
