"""A training log as replay's records: ``trainpulse replay train.log`` reads a job's console output like a trace.

:func:`is_trace` tells a recorded trace (JSON Lines with ``ts``) from a log by
its first lines; :func:`read_logs` reads one or more log files through one
:class:`~trainpulse_otel.logs.LogReader` (several files: several ranks' or
nodes' logs, merged in time order) and yields their reports and failure events
as :class:`~.trace.TraceRecord` s of kind ``training`` and ``event``, which
replay diagnoses as it does a trace's. Flight Recorder dumps among them
(``PREFIX<rank>``) are compared, not read as lines (:mod:`.flight_recorder`).
"""

from __future__ import annotations

import heapq
import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from ..logs import LogLine, LogReader, first_stamp
from ..samples import LogEvent
from .flight_dumps import dump_events, is_dump
from .trace import KINDS, TraceRecord, bounded_lines

log = logging.getLogger(__name__)

#: Lines looked at to tell a trace from a log.
SNIFF_LINES = 20
#: A log line longer than this is cut there (the longest real ones are a few KiB).
MAX_LINE_CHARS = 64 * 1024


def is_trace(fh: IO[bytes]) -> bool:
    """Whether a file reads as a trace: its first non-blank line is a JSON object with ``ts`` and a trace kind.
    The file is left at its start."""
    try:
        for _, raw in zip(range(SNIFF_LINES), fh, strict=False):
            text = raw.strip()
            if not text:
                continue
            try:
                data = json.loads(text)
            except ValueError:
                return False
            return isinstance(data, dict) and "ts" in data and any(kind in data for kind in KINDS)
        return False
    finally:
        fh.seek(0)


def read_logs(paths: Iterable[str], reader: LogReader) -> Iterator[TraceRecord]:
    """Every report and event of the log files at ``paths``, merged in time order."""
    paths = list(paths)
    dumps = [path for path in paths if is_dump(path)]  # Flight Recorder dumps: compared, not read as lines
    streams = [_records(path, reader) for path in paths if path not in dumps]
    if dumps:
        streams.append(iter(sorted((_record(e) for e in dump_events(dumps)), key=lambda r: r.ts)))
    yield from heapq.merge(*streams, key=lambda r: r.ts)
    yield from (_record(item) for item in reader.flush())


#: Lines a replay reads ahead for a file's first stamp (where its unstamped first lines start).
STAMP_SNIFF_LINES = 5000


def _records(path: str, reader: LogReader) -> Iterator[TraceRecord]:
    with Path(path).open("rb") as fh:
        ahead = (raw.decode("utf-8", errors="replace") for _, raw in zip(range(STAMP_SNIFF_LINES), fh, strict=False))
        if (stamp := first_stamp(ahead)) is not None:
            reader.starts[path] = stamp
        fh.seek(0)
        for number, raw in enumerate(bounded_lines(fh, MAX_LINE_CHARS), start=1):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")[:MAX_LINE_CHARS]
            try:
                items = reader.feed(LogLine(text, source=path, number=number))
            except Exception:  # a parser's bug costs that line, never the rest of the file
                log.exception("%s:%d: this line could not be read; going on", path, number)
                continue
            for item in items:
                yield _record(item, number)


def _record(item: object, number: int = 0) -> TraceRecord:
    if isinstance(item, LogEvent):
        return TraceRecord(number, item.ts, "event", item)
    return TraceRecord(number, item.timestamp or 0.0, "training", item)  # type: ignore[attr-defined]
