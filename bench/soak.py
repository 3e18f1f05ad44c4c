"""Soak: the daemon in sim at a 100 ms interval, with ingest at 200 req/s and a scrape every second.

Starts `trainpulse daemon -mode sim -interval 100ms` on loopback, posts an
8-rank training payload at a steady ``--rate`` from a paced keep-alive client,
scrapes `/metrics` and `/v1/snapshot` every second, and samples the daemon's
RSS and CPU every 10 s. After ``--minutes`` it prints: requests sent, errors
(non-2xx answers or connection failures, by kind), RSS after warm-up vs at the
end (growth %), CPU use, and the daemon's exit status on SIGTERM.

    python bench/soak.py [--minutes 10] [--rate 200] [--warmup 60]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import psutil

PAYLOAD = json.dumps(
    {
        "model_name": "llama-3-8b",
        "framework": "pytorch",
        "step_time_ms": 1750.0,
        "tokens_per_sec": 74900.0,
        "mfu": 0.45,
        "world_size": 8,
        "ranks": [{"rank": r, "gpu_index": r, "step_time_ms": 1700.0 + r, "sync_wait_ms": 10.0} for r in range(8)],
    }
).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One keep-alive connection that reconnects after a failure; counts outcomes."""

    def __init__(self, port: int, outcomes: Counter) -> None:
        self.port, self.outcomes, self.conn = port, outcomes, None

    def call(self, method: str, path: str, body: bytes | None = None) -> None:
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            headers = {"Content-Type": "application/json"} if body else {}
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
            response.read()
            self.outcomes[f"{path} {response.status}"] += 1
        except (OSError, http.client.HTTPException) as exc:
            self.outcomes[f"{path} {type(exc).__name__}"] += 1
            self.conn = None


def ingest(port: int, rate: float, stop: threading.Event, outcomes: Counter) -> None:
    client, period, next_at = Client(port, outcomes), 1.0 / rate, time.monotonic()
    while not stop.is_set():
        client.call("POST", "/v1/training", PAYLOAD)
        next_at += period
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def scrape(port: int, stop: threading.Event, outcomes: Counter) -> None:
    client = Client(port, outcomes)
    while not stop.wait(1.0):
        client.call("GET", "/metrics")
        client.call("GET", "/v1/snapshot")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before the RSS baseline")
    args = parser.parse_args()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainpulse_otel",
            "daemon",
            "-mode",
            "sim",
            "-interval",
            "100ms",
            "-addr",
            f"127.0.0.1:{port}",
            "-log-format",
            "json",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc = psutil.Process(daemon.pid)
    time.sleep(3)
    outcomes: Counter = Counter()
    stop = threading.Event()
    workers = [
        threading.Thread(target=ingest, args=(port, args.rate, stop, outcomes)),
        threading.Thread(target=scrape, args=(port, stop, outcomes)),
    ]
    for w in workers:
        w.start()
    started, samples = time.monotonic(), []
    try:
        while time.monotonic() - started < args.minutes * 60:
            time.sleep(10)
            cpu = proc.cpu_times()
            samples.append((time.monotonic() - started, proc.memory_info().rss, cpu.user + cpu.system))
            print(f"  t={samples[-1][0]:5.0f}s rss={samples[-1][1] / 2**20:6.1f} MiB", flush=True)
    finally:
        stop.set()
        for w in workers:
            w.join()
        daemon.send_signal(signal.SIGTERM)
        _, log_text = daemon.communicate(timeout=30)
    base = next(s for s in samples if s[0] >= args.warmup) if samples[-1][0] >= args.warmup else samples[0]
    end = samples[-1]
    errors = {k: v for k, v in outcomes.items() if not k.endswith((" 200", " 202"))}
    logged_errors = [line for line in log_text.splitlines() if '"level": "error"' in line]
    print(f"{args.minutes:g} min, sim at 100 ms, ingest at {args.rate:g} req/s, scrape every 1 s")
    print(f"  requests: {sum(outcomes.values())}  ({dict(sorted(outcomes.items()))})")
    print(f"  errors: {sum(errors.values())} {errors or ''}; error lines in the daemon log: {len(logged_errors)}")
    print(
        f"  RSS: {base[1] / 2**20:.1f} MiB at {base[0]:.0f}s -> {end[1] / 2**20:.1f} MiB at {end[0]:.0f}s "
        f"({(end[1] - base[1]) / base[1]:+.1%})"
    )
    print(f"  daemon CPU: {(end[2] - base[2]) / (end[0] - base[0]):.1%} of one core; exit status {daemon.returncode}")


if __name__ == "__main__":
    main()
