"""The ``follow`` collector: the job's console logs that ``-follow`` names, read as they are written.

Each tick's new lines (:mod:`.tail`: globs, new files, rotation, lines still being written, bounds) go through
one :class:`~trainpulse_otel.logs.LogReader` — each file its own stream, a line's rank from its ``[rankN]:``
prefix or its file's name — stamped with the tick's time; what they complete comes back as
``Collected(reports=…, events=…)``. When a file goes quiet its streams are flushed, so an iteration held for the
timer lines that may follow it (Megatron's) is reported about a second after its line. What was read is
counted through ``on_read`` (the daemon's ``trainpulse.logs.*`` counters). docs/logs.md says it for users.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from ..logs import LogLine, LogReader, ReadStats
from ..samples import LogEvent, TrainingSample
from ._once import LogOnce
from .base import Collected
from .tail import Limits, Tailer

log = logging.getLogger(__name__)

#: ``on_read(lines=…, unknown=…, reports=…, events=…)``: what one collection read.
ReadCounter = Callable[..., None]


class FollowCollector:
    """Tails the files ``patterns`` match and reads their lines (see the module docstring)."""

    name = "follow"

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        framework: str | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_read: ReadCounter | None = None,
    ) -> None:
        self.patterns = tuple(patterns)
        self.tailer = Tailer(self.patterns, limits, clock)
        self.reader = LogReader(framework)
        self.on_read = on_read
        self._counted = ReadStats()
        self._once = LogOnce(log)

    def describe(self) -> str:
        """One line for logs and the snapshot."""
        return "follow: " + ", ".join(self.patterns)

    def collect(self, now: float) -> Collected:
        """The reports and failure events the lines written since the last tick complete, oldest first."""
        polled = self.tailer.poll()
        items: list[TrainingSample | LogEvent] = []
        for line in polled.lines:
            items.extend(self._feed(LogLine(line.text, source=line.path, number=line.number, ts=now)))
        if polled.quiet:  # a file went quiet: what its streams hold is complete
            items.extend(self.reader.flush(polled.quiet))
        self._count()
        reports = tuple(item for item in items if isinstance(item, TrainingSample))
        events = tuple(item for item in items if isinstance(item, LogEvent))
        return Collected(reports=reports or None, events=events or None)

    def close(self) -> None:
        """Close the files followed."""
        self.tailer.close()

    def _feed(self, line: LogLine) -> list[TrainingSample | LogEvent]:
        try:
            return self.reader.feed(line)
        except Exception:  # a parser's bug costs one line, never the daemon's reading
            self._once("feed", logging.ERROR, "follow: a line of %s could not be read; going on", line.source)
            log.debug("the line: %r", line.text, exc_info=True)
            return []

    def _count(self) -> None:
        if self.on_read is None:
            return
        s, c = self.reader.stats, self._counted
        delta = {
            "lines": s.lines - c.lines,
            "unknown": s.unknown - c.unknown,
            "reports": s.reports - c.reports,
            "events": s.events - c.events,
        }
        if any(delta.values()):
            self.on_read(**delta)
            self._counted = s.copy()
