"""Logging set-up: stdlib ``logging`` as text or one JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import IO

_TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message (+ exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class SummarizingFilter(logging.Filter):
    """Let one record through per ``period_s``; fold the rest into a count on the next one.

    waitress warns "Task queue depth is N" on every request queued under load;
    an operator needs to know the API is saturated, not a line per request.
    """

    def __init__(self, period_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.period_s = period_s
        self._clock = clock
        self._next_at = 0.0
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = self._clock()
        if now < self._next_at:
            self._suppressed += 1
            return False
        if self._suppressed:
            record.msg = f"{record.msg} ({self._suppressed} similar messages suppressed in the last {self.period_s:g}s)"
        self._suppressed = 0
        self._next_at = now + self.period_s
        return True


def configure_logging(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Route every logger to ``stream`` (stderr) at ``level``, replacing earlier handlers."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    queue = logging.getLogger("waitress.queue")
    if not any(isinstance(f, SummarizingFilter) for f in queue.filters):
        queue.addFilter(SummarizingFilter())
