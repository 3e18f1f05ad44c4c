"""Ingest throughput: POST /v1/training with an 8-rank payload from 8 keep-alive clients.

Runs, side by side in the same session, on loopback:
  trainpulse   `trainpulse daemon -mode none` (validation, merge into the latest samples, counters)
  bare         a waitress + Flask app with the same thread count that only parses the JSON body,
               waitress at its defaults
  bare-1send   the same bare app with the daemon's one-piece responses (waitress ``send_bytes``,
               see trainpulse_otel/api/server.py): the like-for-like baseline
and drives each with `wrk` (8 connections, 2 threads, keep-alive), alternating
``--runs`` times. Prints the median requests/s and p99 latency of each and the
ratio of trainpulse to each baseline. Needs `wrk` (Debian package `wrk`).

    python bench/ingest.py [--runs 3] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from trainpulse_otel.api.server import SEND_BYTES

PAYLOAD = {
    "model_name": "llama-3-8b",
    "framework": "pytorch",
    "global_step": 1200,
    "step_time_ms": 1750.0,
    "tokens_per_sec": 74900.0,
    "mfu": 0.45,
    "data_wait_ms": 3.0,
    "sync_wait_ms": 12.0,
    "all_reduce_wait_ms": 95.0,
    "world_size": 8,
    "ranks": [
        {
            "rank": r,
            "gpu_index": r,
            "hostname": "node-000",
            "step_time_ms": 1700.0 + r,
            "tokens_per_sec": 9400.0,
            "data_wait_ms": 3.0,
            "sync_wait_ms": 10.0 + r,
            "all_reduce_wait_ms": 95.0,
        }
        for r in range(8)
    ],
}

BARE_APP = """
import sys, warnings
from flask import Flask, request
from waitress import serve
warnings.simplefilter("ignore", DeprecationWarning)
app = Flask("bare")
@app.post("/v1/training")
def ingest():
    request.get_json(force=True)
    return {"status": "accepted"}, 202
@app.get("/healthz")
def healthz():
    return {"status": "ok"}
tuning = {"send_bytes": int(sys.argv[2])} if len(sys.argv) > 2 else {}
serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=4, _quiet=True, **tuning)
"""

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[%s]]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not start")


def start(kind: str, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    if kind == "bare":
        cmd = [sys.executable, "-c", BARE_APP, str(port)]
    elif kind == "bare-1send":
        cmd = [sys.executable, "-c", BARE_APP, str(port), str(SEND_BYTES)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "trainpulse_otel",
            "daemon",
            "-mode",
            "none",
            "-addr",
            f"127.0.0.1:{port}",
            "-log-level",
            "error",
        ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port)
    return proc


def run_wrk(port: int, seconds: int, script: str) -> tuple[float, float]:
    out = subprocess.run(
        ["wrk", "-t2", "-c8", f"-d{seconds}s", "--latency", "-s", script, f"http://127.0.0.1:{port}/v1/training"],  # noqa: S607 - wrk from PATH, a prerequisite
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError(f"{non2xx.group(1)} requests failed:\n{out}")
    return rps, float(p99.group(1)) * scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench/ingest.py needs wrk: apt-get install wrk")
    results: dict[str, list[tuple[float, float]]] = {"trainpulse": [], "bare": [], "bare-1send": []}
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(WRK_SCRIPT % json.dumps(PAYLOAD))
        script = fh.name
    try:
        for _ in range(args.runs):
            for kind in results:
                port = free_port()
                proc = start(kind, port)
                try:
                    results[kind].append(run_wrk(port, args.seconds, script))
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
    finally:
        os.unlink(script)
    print(
        f"8 keep-alive clients, 8-rank payload ({len(json.dumps(PAYLOAD))} bytes), "
        f"{args.runs} runs x {args.seconds}s, medians:"
    )
    medians = {}
    for kind, runs in results.items():
        rps = statistics.median(r for r, _ in runs)
        p99 = statistics.median(p for _, p in runs)
        medians[kind] = rps
        print(f"  {kind:<11} {rps:8.0f} req/s   p99 {p99:6.2f} ms   runs: " + ", ".join(f"{r:.0f}" for r, _ in runs))
    for baseline in ("bare", "bare-1send"):
        print(f"  ratio trainpulse/{baseline}: {medians['trainpulse'] / medians[baseline]:.2f}")


if __name__ == "__main__":
    main()
