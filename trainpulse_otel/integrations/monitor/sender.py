"""A non-blocking REST client for ``POST /v1/training``: bounded queue, one sender thread.

``submit()`` never blocks and never raises: it appends to a bounded queue and
returns; when the queue is full the oldest report is dropped (the newest says
the most about the job now). One daemon thread posts the reports over a
keep-alive ``http.client`` connection with a timeout. A daemon that is down,
slow or answering 5xx/408/429 is retried with exponential backoff while new
reports keep queueing; a 4xx is the payload's fault, so that report is
dropped and counted as rejected. Every outcome is counted in :attr:`stats`.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections import deque
from typing import Any
from urllib.parse import urlsplit

from ...version import __version__

log = logging.getLogger(__name__)

TRAINING_PATH = "/v1/training"
RETRY_STATUSES = frozenset({408, 429})
MIN_BACKOFF_S = 0.25


class RestSender:
    """Posts training reports to a TrainPulse daemon from a background thread."""

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        queue_size: int = 64,
        timeout_s: float = 2.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        url = urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint must be http(s)://HOST[:PORT], got {endpoint!r}")
        self.endpoint = endpoint
        self._url = url
        self._path = url.path.rstrip("/") + TRAINING_PATH
        self._headers = {"Content-Type": "application/json", "User-Agent": f"trainpulse-otel/{__version__}"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout_s = timeout_s
        self._max_backoff_s = max_backoff_s
        self._queue: deque[bytes] = deque()
        self._queue_size = max(1, queue_size)
        self._cond = threading.Condition()
        self._closing = False
        self._busy = False
        self._conn: http.client.HTTPConnection | None = None
        self.counts = {"sent": 0, "dropped": 0, "rejected": 0, "send_errors": 0}
        self._logged: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="trainpulse-sender", daemon=True)
        self._thread.start()

    @property
    def stats(self) -> dict[str, int]:
        """Reports sent, dropped (queue full or never delivered), rejected (4xx), failed attempts, queued."""
        with self._cond:
            return {**self.counts, "queued": len(self._queue)}

    def submit(self, payload: dict[str, Any]) -> None:
        """Queue one report; drops the oldest when full. Never blocks, never raises."""
        try:
            body = json.dumps(payload, separators=(",", ":")).encode()
        except (TypeError, ValueError):
            self._log_once("encode", "a training report could not be encoded as JSON; dropped", exc_info=True)
            self._count("dropped")
            return
        with self._cond:
            if self._closing:
                self.counts["dropped"] += 1
                return
            if len(self._queue) >= self._queue_size:
                self._queue.popleft()
                self.counts["dropped"] += 1
            self._queue.append(body)
            self._cond.notify()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until the queue is empty and nothing is in flight; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (one try each, within ``timeout_s``), then stop."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout_s)
        with self._cond:
            self.counts["dropped"] += len(self._queue)
            self._queue.clear()

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        backoff = 0.0
        while True:
            body = self._next(backoff)
            if body is None:
                break
            outcome = self._post(body)
            with self._cond:
                self._busy = False
                if outcome == "retry":
                    self.counts["send_errors"] += 1
                    if self._closing:  # the daemon is not answering: give up on the rest
                        self.counts["dropped"] += 1 + len(self._queue)
                        self._queue.clear()
                        break
                    self._requeue(body)
                    backoff = min(self._max_backoff_s, max(MIN_BACKOFF_S, backoff * 2))
                else:
                    self.counts["sent" if outcome == "sent" else "rejected"] += 1
                    backoff = 0.0
                self._cond.notify_all()
        self._disconnect()

    def _next(self, backoff: float) -> bytes | None:
        """The next report to post, after ``backoff`` seconds; None once closing with nothing left."""
        with self._cond:
            if backoff and not self._closing:
                self._cond.wait_for(lambda: self._closing, timeout=backoff)
            self._cond.wait_for(lambda: self._queue or self._closing)
            if not self._queue:
                return None
            self._busy = True
            return self._queue.popleft()

    def _requeue(self, body: bytes) -> None:
        if len(self._queue) >= self._queue_size:
            self.counts["dropped"] += 1
        else:
            self._queue.appendleft(body)

    def _post(self, body: bytes) -> str:
        """One POST: ``sent``, ``rejected`` (4xx) or ``retry`` (no answer, 5xx, 408, 429)."""
        try:
            conn = self._connection()
            conn.request("POST", self._path, body=body, headers=self._headers)
            response = conn.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._disconnect()
            self._log_once(
                f"down:{type(exc).__name__}", "TrainPulse daemon at %s not reachable (%s); retrying", self.endpoint, exc
            )
            return "retry"
        if 200 <= response.status < 300:
            return "sent"
        if response.status >= 500 or response.status in RETRY_STATUSES:
            self._log_once(f"status:{response.status}", "TrainPulse daemon answered %d; retrying", response.status)
            return "retry"
        self._log_once(
            f"rejected:{response.status}",
            "TrainPulse daemon rejected a report (%d): %s",
            response.status,
            answer[:300].decode("utf-8", "replace"),
        )
        return "rejected"

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._url.hostname, self._url.port, timeout=self._timeout_s)
        return self._conn

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _count(self, key: str) -> None:
        with self._cond:
            self.counts[key] += 1

    def _log_once(self, key: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning(msg, *args, exc_info=exc_info)
