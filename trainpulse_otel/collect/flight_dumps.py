"""The ``flight_recorder`` collector: PyTorch Flight Recorder dumps (``PREFIX<rank>``) read when a job writes them.

Every 2 s it lists the files ``flight_recorder`` names (the job's ``TORCH_FR_DUMP_TEMP_FILE`` /
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, one file per rank). Dumps already there at start-up are history, not news
(``trainpulse replay`` reads them). Once new or rewritten dumps have stopped changing for one look, a thread of
its own (never the tick's: a thousand ranks' dumps take seconds) reads every dump written since start-up
(:mod:`trainpulse_otel.logs.flight_recorder`: a safe unpickler, a size cap) and compares them
(:mod:`trainpulse_otel.logs.flight_analysis`); the next tick returns each collective some ranks never joined as
``watchdog_timeout`` events naming them, once. A file that is no dump is logged once and skipped.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ..logs.flight_analysis import Mismatch, analyse, events, when
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
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="flight-recorder")
        self._reading: Future | None = None
        log.info(
            "flight recorder: reading the dumps %s<rank> written from now on (%d there already)",
            self.prefix,
            len(self._history),
        )

    def describe(self) -> str:
        return f"flight_recorder: {self.prefix}<rank>"

    def collect(self, now: float) -> Collected:
        """The collectives the newly written dumps show some ranks never joined, as events stamped ``now``: read
        and compared off the tick's thread, told on the tick after."""
        found = self._told_now(now)
        if self.clock() - self._looked < SCAN_S:
            return Collected(events=found or None)
        self._looked = self.clock()
        files = self._scan()
        if files != self._last:  # still being written: wait until two looks agree
            self._pending = self._pending or any(self._history.get(p) != s for p, s in files.items())
            self._last = files
        elif self._pending and self._reading is None:
            self._pending = False
            fresh = {p: s for p, s in files.items() if self._history.get(p) != s}
            self._reading = self._worker.submit(self._compare, fresh)
        return Collected(events=found or None)

    def close(self) -> None:
        """Stop the reader thread (a read under way is abandoned)."""
        self._worker.shutdown(wait=False, cancel_futures=True)

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

    def _compare(self, files: dict[str, Stat]) -> list[tuple[Mismatch, dict[int, str], set[tuple[str, Stat]]]]:
        """On the reader thread: the dumps read and compared; each mismatch with its files and their stats."""
        dumps = [d for path, stat in files.items() if (d := self._dump(path, stat)) is not None]
        sources = {d.rank: d.source for d in dumps}
        return [(m, sources, {(sources[r], files[sources[r]]) for r in m.joined}) for m in analyse(dumps)]

    def _told_now(self, now: float) -> tuple[LogEvent, ...]:
        """What a finished read found that was not told yet, as events at ``now``."""
        if self._reading is None or not self._reading.done():
            return ()
        reading, self._reading = self._reading, None
        try:
            found = reading.result()
        except Exception:  # a bug costs this read, never the daemon
            log.exception("flight recorder: the dumps of %s could not be compared", self.prefix)
            return ()
        out: list[LogEvent] = []
        for mismatch, sources, stamps in found:
            key = (mismatch.pg_name, mismatch.pg_desc, mismatch.seq, mismatch.missing)
            if not stamps <= self._told.get(key, set()):  # told unless a waiting rank's dump is new
                self._told.setdefault(key, set()).update(stamps)
                told = events(mismatch, now, sources)
                log.warning("%s", told[0].message)
                out.extend(told)
        return tuple(out)

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
