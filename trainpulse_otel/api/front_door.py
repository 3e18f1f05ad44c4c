"""The API's front door: reads ahead of ingest, a 503 past the queue limit, and room for the connections.

waitress queues every complete request for its workers in arrival order. :class:`FrontDoorDispatcher` keeps
that queue but puts reads (``GET``/``HEAD``: ``/healthz``, ``/v1/snapshot``, ``/metrics``) ahead of every
queued write, so a thousand ranks' heartbeats never make a liveness probe wait behind them; and once
``queue_limit`` requests are waiting, a further write is answered at once (by waitress's error path in the
serving loop, no worker, no app) with a 503 and ``Retry-After`` that name the limit, its connection kept open.
:func:`fit_open_files` raises the process's open-file limit to fit the connection limit (or lowers the
connection limit to fit the hard limit, with a warning). The bounds: docs/operations.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from waitress.task import ThreadedTaskDispatcher
from waitress.utilities import Error

log = logging.getLogger(__name__)

#: Methods served ahead of queued writes.
READS = frozenset({"GET", "HEAD"})
#: What a refused client is told to wait, in seconds: one heartbeat period.
RETRY_AFTER_S = 2
#: File descriptors kept for everything but the API's connections (logs, OTLP exporters, gRPC, the loop).
SPARE_FILES = 256
#: A refusal is logged at most this often (each is counted in ``refused``).
LOG_EVERY_S = 60.0


class Overloaded(Error):
    """waitress's error for a request refused because ``queue_limit`` requests were already waiting."""

    code = 503
    reason = "Service Unavailable"


class FrontDoorDispatcher(ThreadedTaskDispatcher):  # type: ignore[misc]
    """waitress's worker pool with reads first and writes past ``queue_limit`` refused (see the module).

    ``run_in_loop`` (the server's trigger) answers a refusal in the serving loop, so it never waits for a
    worker; without it, or with a response still unsent on that connection, the refusal goes first in line.
    """

    def __init__(self, queue_limit: int) -> None:
        super().__init__()
        self.queue_limit = queue_limit
        self.refused = 0
        self.run_in_loop: Callable[[Callable[[], None]], None] | None = None
        self._logged_at = -LOG_EVERY_S

    def add_task(self, task: Any) -> None:
        request = _request(task)
        with self.lock:
            queue = self.queue
            if request is not None and request.command not in READS and len(queue) >= self.queue_limit:
                self._refuse(request, len(queue))
                if self.run_in_loop is not None and task.total_outbufs_len < task.adj.outbuf_high_watermark:
                    self.run_in_loop(task.service)  # the loop runs it once received() has let the channel go
                    return
            if request is not None and (request.command in READS or request.error is not None):
                at = 0
                while at < len(queue) and _ahead(queue[at]):
                    at += 1
                queue.insert(at, task)
            else:
                queue.append(task)
            self.queue_cv.notify()

    def _refuse(self, request: Any, waiting: int) -> None:
        request.error = Overloaded(
            f"the daemon is overloaded: {waiting} requests are waiting for a worker "
            f"(server.queue_limit {self.queue_limit}); retry after {RETRY_AFTER_S} s"
        )
        self.refused += 1
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning(
                "API overloaded: %d requests waiting; refusing writes with 503 (%d so far)", waiting, self.refused
            )


def _request(task: Any) -> Any:
    """The request a queued channel will serve next (None for anything else, or a cancelled channel)."""
    requests = getattr(task, "requests", None)
    return requests[0] if requests else None


def _ahead(task: Any) -> bool:
    request = _request(task)
    return request is not None and (request.command in READS or request.error is not None)


def fit_open_files(connection_limit: int) -> int:
    """Raise the soft open-file limit to fit ``connection_limit`` connections; the limit that fits."""
    try:
        import resource
    except ImportError:  # not POSIX: the platform's own limit applies
        return connection_limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = connection_limit + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(hard, need)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            log.debug("could not raise the open-file limit to %d", raised, exc_info=True)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return connection_limit
    fitted = max(8, soft - SPARE_FILES)
    log.warning(
        "server.connection_limit %d lowered to %d: the open-file limit is %d (raise it: ulimit -n, LimitNOFILE=)",
        connection_limit,
        fitted,
        soft,
    )
    return fitted
