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
import re
import time
from collections.abc import Callable

from ..logs.flight_analysis import analyse, events, when
from ..logs.flight_recorder import JSON_START, MAX_DUMP_BYTES, Dump, DumpError, parse_dump, rank_of
from ..samples import LogEvent
from ._once import LogOnce
from .base import Collected

log = logging.getLogger(__name__)

#: Seconds between two looks at the files.
SCAN_S = 2.0
#: Dump files considered at most (a rank each).
MAX_FILES = 65536

#: A file whose name ends with its rank.
RANKED = re.compile(r"^(.*?)(\d+)$")
#: A dump written as JSON names its entries within this many bytes (its keys come sorted: ``entries`` second).
JSON_SNIFF = 4096

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
        self._told: dict[tuple, set[tuple[str, Stat]]] = {}  # what was told: each mismatch's waiting dumps
        self._once = LogOnce(log)
        log.info(
            "flight recorder: reading the dumps %s<rank> written from now on (%d there already)",
            self.prefix,
            len(self._history),
        )

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
            key = (mismatch.pg_name, mismatch.pg_desc, mismatch.seq, mismatch.missing)
            stamps = {(sources[r], files[sources[r]]) for r in mismatch.joined}
            if not stamps <= self._told.get(key, set()):  # told unless a waiting rank's dump is new
                self._told.setdefault(key, set()).update(stamps)
                told = events(mismatch, now, sources)
                log.warning("%s", told[0].message)
                out.extend(told)
        return out

    def _dump(self, path: str, stat: Stat) -> Dump | None:
        try:
            return read_dump(path, rank_of(path, self.prefix) or 0)
        except DumpError as exc:
            self._once((path, stat), logging.WARNING, "flight recorder: %s", exc)
        except OSError as exc:
            self._once((path, stat), logging.WARNING, "flight recorder: cannot read %s: %s", path, exc.strerror)
        return None


def read_dump(path: str, rank: int) -> Dump:
    """``rank``'s dump from its file, at most :data:`MAX_DUMP_BYTES` read; :class:`DumpError` or ``OSError``."""
    size = os.stat(path).st_size
    if size > MAX_DUMP_BYTES:
        raise DumpError(f"{path}: {size} bytes, more than a dump's {MAX_DUMP_BYTES} (not read)")
    with open(path, "rb") as fh:
        return parse_dump(fh.read(MAX_DUMP_BYTES + 1), path, rank)


def is_dump(path: str) -> bool:
    """Whether a file given to ``replay`` is a Flight Recorder dump: a pickle (protocol 2 or later) or a JSON
    object with ``entries``, named ``…<rank>``."""
    if RANKED.match(os.path.basename(path)) is None:
        return False
    with open(path, "rb") as fh:
        head = fh.read(JSON_SNIFF)
    return head[:1] == b"\x80" or (JSON_START.match(head) is not None and b'"entries"' in head)


def dump_events(paths: list[str]) -> list[LogEvent]:
    """What ``replay`` makes of dump files: each collective some ranks never joined, as events at the time its
    watchdog fired by the dumps' clock (else the newest file's time). A file that is no dump is logged, skipped."""
    dumps = []
    for path in paths:
        try:
            dumps.append(read_dump(path, int(RANKED.match(os.path.basename(path))[2])))  # type: ignore[index]
        except (DumpError, OSError) as exc:
            log.warning("flight recorder: %s; skipped", exc)
    sources = {d.rank: d.source for d in dumps}
    newest = max((os.path.getmtime(d.source) for d in dumps), default=0.0)
    return [e for m in analyse(dumps) for e in events(m, when(m) or newest, sources)]


def open_flight_recorder(prefix: str) -> FlightRecorderCollector:
    """The collector for the dumps of ``prefix`` (config key ``flight_recorder``)."""
    return FlightRecorderCollector(prefix)
