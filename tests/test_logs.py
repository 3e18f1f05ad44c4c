"""Logging: JSON lines, and waitress's queue-depth warnings summarised instead of flooding."""

import io
import json
import logging

from trainpulse_otel.runtime.logging_setup import SummarizingFilter, configure_logging


def test_json_format_is_one_object_per_line():
    stream = io.StringIO()
    configure_logging("info", "json", stream)
    logging.getLogger("trainpulse_otel.test").warning("disk %s is full", "/var")
    entry = json.loads(stream.getvalue().strip())
    assert entry["level"] == "warning" and entry["message"] == "disk /var is full"
    assert entry["logger"] == "trainpulse_otel.test" and entry["ts"].endswith("Z")


def test_queue_depth_warnings_are_summarised():
    now = [0.0]
    flt = SummarizingFilter(period_s=60.0, clock=lambda: now[0])
    records = [
        logging.LogRecord("waitress.queue", logging.WARNING, "", 0, "Task queue depth is %d", (i,), None)
        for i in range(1000)
    ]
    passed = [r for r in records[:999] if flt.filter(r)]
    assert len(passed) == 1
    now[0] = 61.0
    assert flt.filter(records[999])
    assert "998 similar messages suppressed" in records[999].getMessage()


def test_configure_logging_installs_the_filter_once():
    configure_logging("info", "text", io.StringIO())
    configure_logging("info", "text", io.StringIO())
    filters = [f for f in logging.getLogger("waitress.queue").filters if isinstance(f, SummarizingFilter)]
    assert len(filters) == 1
