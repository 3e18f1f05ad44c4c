"""Real Prometheus and Alertmanager processes for the export tests: start one, wait for its line or its
readiness, poll it, and a webhook that records what Alertmanager sends."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class Webhook:
    """Alertmanager's webhook receiver: every notification body it was sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self) -> list[dict[str, Any]]:
        return [alert for body in self.bodies for alert in body["alerts"]]


def start(argv: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=cwd)


def wait_for_line(proc: subprocess.Popen, pattern: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = re.search(pattern, line)
        if match:
            return match.group(1)
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"the daemon never logged {pattern!r}")


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def poll(probe: Any, timeout: float, step: float = 0.5) -> Any:
    """Call ``probe`` until it returns something truthy, or the timeout passes; return the last answer."""
    deadline = time.monotonic() + timeout
    answer = probe()
    while not answer and time.monotonic() < deadline:
        time.sleep(step)
        answer = probe()
    return answer
