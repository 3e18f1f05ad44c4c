"""The hand-over from simulated training reports to real ones: real reports win.

In ``-mode sim`` a real trainer may report too (``POST /v1/training``, a
``/v1/framework`` adapter, the SDK). Two loops writing one job's training view
would overwrite each other every tick, so while real reports arrive the
simulator's training loop stands down (its GPUs and host go on), and it
resumes once none has arrived for ``stale_after`` — the moment the engine
forgets the last real report anyway.

The composition root makes one :class:`RealReports` and hands it to both
sides: the engine's ingest path stamps it (one store per report, nothing
more on the hot path) and the :class:`~.collector.SimCollector` reads it
once per tick.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RealReports:
    """When the last real training report reached the engine."""

    stale_after_s: float
    last_ts: float | None = None

    def arrived(self, ts: float) -> bool:
        """A real report was ingested at ``ts`` (unix seconds); True when it starts a hand-over (none was arriving)."""
        starts = not self.active(ts)
        self.last_ts = ts
        return starts

    def active(self, now: float) -> bool:
        """Whether real reports are arriving at ``now``: the last came less than ``stale_after_s`` before.

        A report stamped after ``now`` (ingested while this tick ran) counts as arriving.
        """
        last = self.last_ts
        return last is not None and now - last < self.stale_after_s
