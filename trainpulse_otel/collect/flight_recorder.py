"""The ``flight_recorder`` collector: PyTorch Flight Recorder dumps (``PREFIX<rank>``) read when a job writes them.

Every 2 s it lists the files ``flight_recorder`` names (the job's ``TORCH_FR_DUMP_TEMP_FILE`` /
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, one file per rank). Dumps already there at start-up are history, not news
(``trainpulse replay`` reads them); once new or rewritten dumps have stopped changing for one look, it reads every
dump written since start-up (:mod:`trainpulse_otel.logs.flight_recorder`: a safe unpickler, a size cap),
compares them (:mod:`trainpulse_otel.logs.flight_analysis`) and returns each collective some ranks never joined
as ``watchdog_timeout`` events naming them, once. A file that is no dump is logged once and skipped.
"""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Callable

from ..logs.flight_analysis import analyse, events
from ..logs.flight_recorder import MAX_DUMP_BYTES, Dump, DumpError, parse_dump, rank_of
from ..samples import LogEvent
from ._once import LogOnce
from .base import Collected

log = logging.getLogger(__name__)

#: Seconds between two looks at the files.
SCAN_S = 2.0
#: Dump files considered at most (a rank each).
MAX_FILES = 65536

#: A file's identity for "changed": its modification time and size.
Stat = tuple[int, int]


class FlightRecorderCollector:
    """Reads the dumps of ``prefix`` as the job writes them (see the module docstring)."""

    name = "flight_recorder"

    def __init__(self, prefix: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.prefix = os.path.expanduser(prefix)
        self.clock = clock
        self._history = self._scan()  # there before us: not news
        self._last: dict[str, Stat] = dict(self._history)
        self._looked = clock()
        self._pending = False
        self._told: set[tuple] = set()
        self._once = LogOnce(log)

    def describe(self) -> str:
        return f"flight_recorder: {self.prefix}<rank>"

    def collect(self, now: float) -> Collected:
        """The collectives the newly written dumps show some ranks never joined, as events stamped ``now``."""
        if self.clock() - self._looked < SCAN_S:
            return Collected()
        self._looked = self.clock()
        files = self._scan()
        settled = files == self._last
        if not settled:
            self._pending = self._pending or any(self._history.get(p) != s for p, s in files.items())
            self._last = files
            return Collected()
        if not self._pending:
            return Collected()
        self._pending = False
        found = self._read({p: s for p, s in files.items() if self._history.get(p) != s}, now)
        return Collected(events=tuple(found) or None)

    def close(self) -> None:
        """Nothing held open."""

    def _scan(self) -> dict[str, Stat]:
        files: dict[str, Stat] = {}
        for path in sorted(glob.glob(glob.escape(self.prefix) + "*"))[:MAX_FILES]:
            if rank_of(path, self.prefix) is None:
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue  # gone between the listing and the look
            files[path] = (st.st_mtime_ns, st.st_size)
        return files

    def _read(self, files: dict[str, Stat], now: float) -> list[LogEvent]:
        dumps = [d for path, stat in files.items() if (d := self._dump(path, stat)) is not None]
        out: list[LogEvent] = []
        sources = {d.rank: d.source for d in dumps}
        for mismatch in analyse(dumps):
            stamp = tuple(files[sources[r]] for r in mismatch.joined)
            key = (mismatch.pg_name, mismatch.pg_desc, mismatch.seq, mismatch.missing, stamp)
            if key not in self._told:
                self._told.add(key)
                log.warning("flight recorder: %s", events(mismatch, now)[0].message)
                out.extend(events(mismatch, now, sources))
        return out

    def _dump(self, path: str, stat: Stat) -> Dump | None:
        rank = rank_of(path, self.prefix)
        try:
            if stat[1] > MAX_DUMP_BYTES:
                raise DumpError(f"{path}: {stat[1]} bytes, more than a dump's {MAX_DUMP_BYTES} (not read)")
            with open(path, "rb") as fh:
                return parse_dump(fh.read(MAX_DUMP_BYTES + 1), path, rank or 0)
        except DumpError as exc:
            self._once((path, stat), logging.WARNING, "flight recorder: %s", exc)
        except OSError as exc:
            self._once((path, stat), logging.WARNING, "flight recorder: cannot read %s: %s", path, exc.strerror)
        return None


def open_flight_recorder(prefix: str) -> FlightRecorderCollector:
    """The collector for the dumps of ``prefix`` (config key ``flight_recorder``)."""
    return FlightRecorderCollector(prefix)
