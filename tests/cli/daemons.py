"""Real daemons in subprocesses: a simulated one, and one following log files, each with its API's address."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.exports.receivers import wait_until

LISTENING = re.compile(r"API listening on (http://\S+)")


class SimDaemon:
    """A running ``trainpulse daemon -mode sim`` (or another ``mode``): its URL, its log lines, a tiny JSON client.

    ``env``: variables on top of a clean environment (no ``OTEL_*``/``TRAINPULSE_*`` of the test run's own).
    """

    def __init__(self, *flags: str, mode: str = "sim", env: dict[str, str] | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRAINPULSE_"))} | (env or {})
        env["TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        argv = [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", mode, "-addr", "127.0.0.1:0", *flags]
        self.proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.url = ""
        threading.Thread(target=self._read_log, daemon=True).start()
        if not wait_until(lambda: bool(self.url) or self.proc.poll() is not None, timeout=60):
            raise AssertionError(f"the daemon did not start its API: {self.lines}")
        assert self.url, self.lines

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.load(resp)

    def post(self, path: str, body: dict[str, Any]) -> int:
        req = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status

    def snapshot_when(self, ready: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> dict[str, Any]:
        """The first snapshot that is ``ready``."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.get("/v1/snapshot")
            if ready(snap):
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(f"no ready snapshot within {timeout}s; the last: {snap}")
            time.sleep(0.1)

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


PROMISED_S = 5.0


class FollowDaemon(SimDaemon):
    """``trainpulse daemon -mode none -follow PATTERNS``: a daemon that only reads logs."""

    def __init__(self, *patterns: Path | str, flags: tuple[str, ...] = ()) -> None:
        super().__init__("-follow", ",".join(str(p) for p in patterns), *flags, mode="none")

    def reading(self, path: Path, timeout: float = 20.0) -> None:
        """Wait until the daemon has opened ``path`` (lines written before that are history, not news)."""
        if not wait_until(lambda: any(f"reading {path} from" in line for line in self.lines), timeout=timeout):
            raise AssertionError(f"the daemon did not open {path}: {self.lines}")

    def signal_within(self, name: str, seconds: float = PROMISED_S) -> tuple[dict[str, Any], float]:
        """The signal ``name`` and how long after now it appeared in ``/v1/snapshot``."""
        began = time.monotonic()
        snap = self.snapshot_when(lambda s: any(g["name"] == name for g in s["diagnosis"]["signals"]), seconds)
        return next(g for g in snap["diagnosis"]["signals"] if g["name"] == name), time.monotonic() - began

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
