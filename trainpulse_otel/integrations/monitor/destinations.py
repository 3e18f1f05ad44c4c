"""Where the monitor's reports go: an in-process pipeline, a daemon over REST, or nowhere.

Each destination runs its own background thread that calls ``drain()`` once
per interval; the training thread never waits for any of them.

- :class:`InProcess` — an :class:`~trainpulse_otel.runtime.engine.Engine` whose first
  collector drains the monitor: the reports go through the same OTel
  instruments, reader, window, diagnostic pipeline and publisher as in the
  daemon (plus the hardware collectors of ``hardware``), and records a trace of
  every tick when given ``record``.
- :class:`Rest` — posts each report to ``{endpoint}/v1/training`` through a
  :class:`~.sender.RestSender`.
- :class:`Silent` — ranks other than 0: their numbers reach rank 0 through
  the gather, so they send nothing themselves.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from ...collect.base import Collected
from ...samples import TrainingSample, to_dict

log = logging.getLogger(__name__)

Drain = Callable[[], "TrainingSample | None"]


class Destination(Protocol):
    def flush(self) -> None: ...

    def diagnosis(self) -> dict[str, Any] | None: ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...


class MonitorCollector:
    """A Collector over the monitor: each tick drains the buffered steps into one report."""

    name = "monitor"

    def __init__(self, drain: Drain) -> None:
        self._drain = drain

    def collect(self, now: float) -> Collected:
        return Collected(training=self._drain())

    def close(self) -> None:
        """Nothing to release: the monitor owns the buffer."""


class InProcess:
    """An engine ticking in a background thread, fed by :class:`MonitorCollector`."""

    def __init__(self, drain: Drain, interval: float, hardware: str = "auto", record: str | None = None) -> None:
        from ...config import Settings
        from ...runtime import BackgroundTicks, open_engine

        # ``record``: the engine's trace recorder writes every tick to that JSONL file, as ``daemon -record``.
        settings = Settings(mode=hardware, interval=interval, record=record)
        # OTLP push from the standard OTEL_* variables, as the contract promises for in-process mode.
        self.engine = open_engine(settings, push=True, extra_collectors=[MonitorCollector(drain)])
        self._ticks = BackgroundTicks(self.engine, "trainpulse-monitor")
        self._ticks.start()

    def flush(self) -> None:
        """Tick now: drain, read the instruments, diagnose, publish."""
        self.engine.tick()

    def diagnosis(self) -> dict[str, Any]:
        return self.engine.pipeline.diagnosis.to_dict()

    def stats(self) -> dict[str, int]:
        return {"ticks": self.engine.ticks}

    def close(self) -> None:
        self._ticks.stop()
        try:
            self.engine.tick()
        finally:
            self.engine.close()


class Rest:
    """Drains once per interval and hands each report to a non-blocking sender."""

    def __init__(
        self,
        drain: Drain,
        interval: float,
        endpoint: str,
        token: str | None = None,
        queue_size: int = 64,
        timeout_s: float = 2.0,
    ) -> None:
        from .sender import RestSender

        self.sender = RestSender(endpoint, token, queue_size=queue_size, timeout_s=timeout_s)
        self._drain = drain
        self._interval = interval
        self._timeout_s = timeout_s
        self._token = token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainpulse-drain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._send_one()

    def _send_one(self) -> None:
        try:
            sample = self._drain()
        except Exception:  # the drain thread must outlive a bad interval
            log.exception("building a training report failed")
            return
        if sample is not None:
            self.sender.submit(to_dict(sample))

    def flush(self, timeout_s: float = 5.0) -> None:
        """Drain now and wait (up to ``timeout_s``) until the sender has delivered or given up."""
        self._send_one()
        self.sender.wait_idle(timeout_s)

    def diagnosis(self) -> dict[str, Any] | None:
        """The daemon's current diagnosis (``GET /v1/snapshot``), or None when it does not answer."""
        url = urlsplit(self.sender.endpoint if "://" in self.sender.endpoint else "http://" + self.sender.endpoint)
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = cls(url.hostname, url.port, timeout=self._timeout_s)
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            conn.request("GET", url.path.rstrip("/") + "/v1/snapshot", headers=headers)
            response = conn.getresponse()
            body = response.read()
            return json.loads(body).get("diagnosis") if response.status == 200 else None
        except (OSError, http.client.HTTPException, ValueError, AttributeError):
            return None
        finally:
            conn.close()

    def stats(self) -> dict[str, int]:
        return self.sender.stats

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._send_one()
        self.sender.close()


class Silent:
    """A rank that only takes part in the gather."""

    def flush(self) -> None:
        """Nothing buffered to send."""

    def diagnosis(self) -> None:
        return None

    def stats(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        """Nothing to release."""
