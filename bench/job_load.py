"""A job daemon under load, for ``bench/job_daemon.py``: starting it, feeding it pushes, reading its ticks.

``LoadGenerator`` sends each request slot's bodies (one a push, cycling) every push interval at the slot's own
phase within it, over a few keep-alive connections; ``TickPoller`` reads each tick's duration from ``/healthz``.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

#: How often ``/healthz`` is asked for the newest tick's duration (a tick a second: none is missed).
POLL_S = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(port: int) -> subprocess.Popen:
    """A job daemon (``-mode none``, its default ``node_series``) on loopback, once ``/healthz`` answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    env["TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    cmd = [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", "none"]
    cmd += ["-addr", f"127.0.0.1:{port}", "-interval", "1s", "-log-level", "error"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the job daemon did not start")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of ``values``, nearest rank (of 60 ticks, p99 is the slowest); 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


class TickPoller:
    """Each tick's duration, read from ``/healthz`` every ``POLL_S`` while ``record`` is set."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.record = False
        self.durations: dict[int, float] = {}  # tick number → ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self._stop.wait(POLL_S):
            conn.request("GET", "/healthz")
            body = json.loads(conn.getresponse().read())
            if self.record and body.get("last_tick_duration_ms") is not None:
                self.durations[body["ticks"]] = body["last_tick_duration_ms"]


class LoadGenerator:
    """Every ``interval_s``, each request slot's next body POSTed at the slot's own phase within the interval;
    a slot in ``stop_after`` falls silent that many seconds after the start (a node that stopped)."""

    def __init__(
        self,
        port: int,
        requests: list[list[bytes]],
        interval_s: float,
        gzipped: bool,
        stop_after: dict[int, float] | None = None,
        connections: int = 8,
    ) -> None:
        self.port = port
        self.headers = {"Content-Type": "application/x-protobuf", **({"Content-Encoding": "gzip"} if gzipped else {})}
        self.requests = requests
        self.interval_s = interval_s
        self.stop_after = stop_after or {}
        self.latencies: list[float] = []
        self.failed = 0
        self.record = False
        self.started = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        per = -(-len(requests) // connections)
        groups = [range(i, min(i + per, len(requests))) for i in range(0, len(requests), per)]
        self._threads = [threading.Thread(target=self._drive, args=(g,), daemon=True) for g in groups]

    def start(self) -> None:
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _drive(self, slots: range) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        push = 0
        while not self._stop.is_set():
            for slot in slots:  # slot i sends at i/N of each interval
                offset = (push + slot / len(self.requests)) * self.interval_s
                if offset >= self.stop_after.get(slot, math.inf):
                    continue
                if self._stop.wait(max(0.0, self.started + offset - time.monotonic())):
                    return
                conn, ok, took = self._post(conn, self.requests[slot][push % len(self.requests[slot])])
                with self._lock:
                    if self.record:
                        self.latencies.append(took)
                        self.failed += 0 if ok else 1
            push += 1

    def _post(self, conn: http.client.HTTPConnection, body: bytes) -> tuple[http.client.HTTPConnection, bool, float]:
        began = time.perf_counter()
        try:
            conn.request("POST", "/v1/metrics", body, self.headers)
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except OSError:
            conn.close()
            conn, ok = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30), False
        return conn, ok, time.perf_counter() - began
