"""Where ``top`` gets snapshots: a local engine, or a running daemon over HTTP.

Both answer ``poll() -> Snapshot | None`` and keep a :class:`~.view.Link`
saying how that is going, so the loop and the panels treat them alike. Both
fill the sparklines' :class:`~.view.History` before the first frame: locally
from the warm-up's ticks, remotely from the daemon's ``/v1/history`` — on
connecting, and again after an outage for the frames missed.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from ..publish.snapshot import Snapshot, history_from_dict
from ..samples import Frame, SampleError
from .view import History, Link

log = logging.getLogger(__name__)

#: How long the header says "reconnected" before it settles back to "connected".
RECONNECTED_SHOWN_S = 10.0
#: The longest a remote poll may block the screen.
MAX_FETCH_TIMEOUT_S = 3.0


class RemoteSource:
    """Follows a daemon's ``GET /v1/snapshot``; a failed poll, or a body it cannot read, marks the link disconnected."""

    def __init__(
        self, url: str, token: str | None = None, timeout_s: float = 2.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.url = (url if "://" in url else f"http://{url}").rstrip("/")  # "-remote host:9876" works too
        self.token = token
        self.timeout_s = min(timeout_s, MAX_FETCH_TIMEOUT_S)
        self.clock = clock
        self.link = Link(source=self.url, state="connecting", changed_at=clock())
        self.history: History | None = None

    def start(self, history: History, live: bool) -> None:
        """Fill ``history`` from the daemon's window when a poll connects (or reconnects)."""
        self.history = history

    def poll(self) -> Snapshot | None:
        """The daemon's latest snapshot, or None (and a disconnected link) when it cannot be read.

        On connecting and after an outage the daemon's history comes first, so
        the sparklines are full from the first frame and the outage leaves no gap
        the daemon still holds; the snapshot, fetched after it, is the newest.
        """
        now = self.clock()
        try:
            if self.history is not None and self.link.state in ("connecting", "disconnected"):
                self.history.extend(self._history(self.history))
            snapshot = Snapshot.from_dict(self._get("/v1/snapshot"))
        except (OSError, ValueError) as exc:
            self._move("disconnected", now, error=describe_error(exc))
            return None
        self._move(self._connected_state(now), now, error=None, last_ok=now)
        return snapshot

    def _move(self, state: str, now: float, **fields: Any) -> None:
        changed_at = now if state != self.link.state else self.link.changed_at
        self.link = replace(self.link, state=state, changed_at=changed_at, **fields)

    def _connected_state(self, now: float) -> str:
        """``reconnected`` for a while after an outage, so the recovery is seen; then ``connected``."""
        state = self.link.state
        if state == "disconnected":
            return "reconnected"
        if state == "reconnected" and now - self.link.changed_at < RECONNECTED_SHOWN_S:
            return "reconnected"
        return "connected"

    def _history(self, history: History) -> tuple[Frame, ...]:
        """The daemon's frames newer than ``history`` holds, at most as many as it keeps.

        A daemon that answers without them (an older version: 404; a body that
        does not read) costs only the back-fill: the ring fills as polls arrive.
        """
        query = {"limit": history.size}
        if history.newest_ts is not None:
            query["since"] = history.newest_ts
        try:
            return history_from_dict(self._get("/v1/history?" + urllib.parse.urlencode(query)))
        except (urllib.error.HTTPError, ValueError) as exc:
            log.debug("no history from %s: %s", self.url, describe_error(exc))
            return ()

    def _get(self, path: str) -> Any:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url + path, headers=headers)  # noqa: S310 - the URL `-remote` names
        with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:  # noqa: S310 - the same
            return json.load(resp)

    def close(self) -> None:
        """Nothing to release: each poll opens and closes its own connection."""


def describe_error(exc: Exception) -> str:
    """A short reason for the header: ``connection refused``, ``HTTP 401 Unauthorized``."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    reason: Any = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    if isinstance(reason, json.JSONDecodeError):
        return "the response is not JSON"
    if isinstance(reason, SampleError):
        return f"unreadable: {reason}"
    return str(reason) or type(reason).__name__


class LocalEngine(Protocol):
    """A pipeline running in this process, as the composition root hands it to ``top``."""

    label: str

    def start(self, on_tick: Callable[[Any], None] | None, live: bool) -> None: ...

    def snapshot(self) -> Snapshot: ...

    def close(self) -> None: ...


class LocalSource:
    """Snapshots from a pipeline in this process (:class:`~trainpulse_otel.runtime.LocalEngine`).

    Its warm-up fills the sparklines' history: in ``-mode sim`` the whole
    warm-up window in virtual time, so the scenario's fault and the sparklines
    are on screen from the first frame.
    """

    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine
        self.link = Link(source=engine.label, state="local", changed_at=time.time())

    def start(self, history: History, live: bool) -> None:
        """Warm the engine up, keeping each snapshot for the sparklines; then keep ticking if ``live``."""
        self.engine.start(lambda _: history.add(self.engine.snapshot()), live)

    def poll(self) -> Snapshot:
        return self.engine.snapshot()

    def close(self) -> None:
        self.engine.close()


class Source(Protocol):
    """Where snapshots come from (:class:`LocalSource` or :class:`RemoteSource`)."""

    link: Link

    def start(self, history: History, live: bool) -> None: ...

    def poll(self) -> Snapshot | None: ...

    def close(self) -> None: ...
