"""Many ranks, one daemon: every rank posts a heartbeat every period over its own keep-alive connection.

Starts a fresh daemon (`-mode none`, the real composition and its 1 s tick) in a process of its own for
each case and drives it from this process with one asyncio client per rank, each on a keep-alive
connection, posting ``{"ranks": [heartbeat]}`` to ``POST /v1/training`` every ``--period`` at a random
phase (ranks' monitors start at different moments). A supervisor meanwhile asks ``GET /v1/snapshot`` and
``GET /healthz`` every 0.5 s on fresh connections. Two servers, side by side in the same run:

  tuned     the daemon as it ships (the ``server`` settings' defaults: poll, 4,096 connections, idle
            connections closed after 30 s, 8 workers, reads ahead of ingest, 503 past the queue limit)
  poll      tuned, but on waitress's own poll() loop, which asks every connection each turn
            (``--servers tuned,poll,untuned``; the shipped loop asks only the active ones)
  untuned   the same daemon on waitress as it comes (100 connections, select(), 4 workers, FIFO)

Prints, per case, the posts answered 2xx, refused (503), failed (timeout, reset), their median and p99
latency, and the snapshot's and health check's worst answer; then the ratios tuned/untuned.

    python bench/ingest_ranks.py [--ranks 128,512,1024] [--seconds 20] [--period 2] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

CLIENT_TIMEOUT_S = 5.0
PROBE_EVERY_S = 0.5


def serve(kind: str, port: int) -> None:
    """The daemon (this process): ``-mode none`` on ``port``, tuned or on waitress's defaults."""
    import logging
    import threading

    logging.getLogger("waitress").setLevel(logging.CRITICAL)  # the untuned server warns on every connection
    from trainpulse_otel.api import ApiServer
    from trainpulse_otel.config import load_settings
    from trainpulse_otel.runtime import create_api, discover, open_engine

    settings = load_settings(flags={"mode": "none", "addr": f"127.0.0.1:{port}", "log_level": "error"}, environ={})
    plugins = discover()
    engine = open_engine(settings, push=True, plugins=plugins)
    limits = None if kind == "untuned" else settings.server
    server = ApiServer(create_api(engine, settings, plugins), settings.host, settings.port, limits, kind == "tuned")
    server.start()
    engine.run(threading.Event())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_daemon(kind: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, "--port", str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the {kind} daemon did not listen on {port}")


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    """Send one request, read one response; its status."""
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return status


def heartbeat(rank: int, step: int) -> bytes:
    body = json.dumps(
        {"ranks": [{"rank": rank, "global_step": step, "phase": "compute", "phase_since": time.time(), "pid": 1000}]}
    ).encode()
    head = f"POST /v1/training HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


class Tally:
    def __init__(self) -> None:
        self.ok: list[float] = []
        self.refused = 0
        self.failed = 0
        self.probes: dict[str, list[float]] = {"/v1/snapshot": [], "/healthz": []}


async def rank_client(port: int, rank: int, period: float, until: float, tally: Tally) -> None:
    next_at = time.monotonic() + random.uniform(0, period)
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    step = 0
    while next_at < until:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        next_at += period
        started = time.monotonic()
        try:
            if conn is None:
                conn = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), CLIENT_TIMEOUT_S)
            status = await asyncio.wait_for(exchange(*conn, heartbeat(rank, step)), CLIENT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            tally.failed += 1
            conn = _closed(conn)
            continue
        step += 1
        if 200 <= status < 300:
            tally.ok.append(time.monotonic() - started)
        elif status == 503:
            tally.refused += 1
        else:
            tally.failed += 1


def _closed(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
    if conn is not None:
        conn[1].close()


async def supervisor(port: int, until: float, tally: Tally) -> None:
    """GET the snapshot and the health check on fresh connections; a timeout counts as the client's limit."""
    while time.monotonic() < until:
        for path, seen in tally.probes.items():
            started = time.monotonic()
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), CLIENT_TIMEOUT_S)
                request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
                await asyncio.wait_for(exchange(reader, writer, request), CLIENT_TIMEOUT_S)
                writer.close()
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                pass
            seen.append(time.monotonic() - started)
        await asyncio.sleep(PROBE_EVERY_S)


async def drive(port: int, ranks: int, seconds: float, period: float) -> Tally:
    tally = Tally()
    until = time.monotonic() + seconds
    clients = [rank_client(port, r, period, until, tally) for r in range(ranks)]
    await asyncio.gather(supervisor(port, until, tally), *clients)
    return tally


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU time (Linux)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_case(kind: str, ranks: int, seconds: float, period: float) -> dict[str, object]:
    proc, port = start_daemon(kind)
    try:
        cpu_before, started = cpu_seconds(proc.pid), time.monotonic()
        tally = asyncio.run(drive(port, ranks, seconds, period))
        cpu_pct = 100 * (cpu_seconds(proc.pid) - cpu_before) / (time.monotonic() - started)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    posts = len(tally.ok) + tally.refused + tally.failed
    ms = [v * 1000 for v in tally.ok]
    return {
        "server": kind,
        "ranks": ranks,
        "posts": posts,
        "ok": len(tally.ok),
        "refused": tally.refused,
        "failed": tally.failed,
        "p50_ms": round(statistics.median(ms), 2) if ms else None,
        "p99_ms": round(quantile(ms, 0.99), 2) if ms else None,
        "daemon_cpu_pct": round(cpu_pct, 1),
        "snapshot_max_ms": round(max(tally.probes["/v1/snapshot"]) * 1000, 1),
        "healthz_max_ms": round(max(tally.probes["/healthz"]) * 1000, 1),
    }


def show(row: dict[str, object]) -> str:
    return (
        f"{row['server']:8} {row['ranks']:5} ranks  posts {row['posts']:6}  2xx {row['ok']:6}  "
        f"503 {row['refused']:5}  failed {row['failed']:5}  p50 {row['p50_ms']} ms  p99 {row['p99_ms']} ms  "
        f"cpu {row['daemon_cpu_pct']} %  snapshot max {row['snapshot_max_ms']} ms  healthz max {row['healthz_max_ms']} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="128,512,1024", help="comma-separated rank counts")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--period", type=float, default=2.0, help="heartbeat period of each rank, seconds")
    parser.add_argument("--servers", default="tuned,untuned")
    parser.add_argument("--json", action="store_true", help="one JSON line per case")
    parser.add_argument("--serve", choices=("tuned", "poll", "untuned"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0
    print(f"{os.cpu_count()} CPUs; {args.seconds:g} s per case, a heartbeat every {args.period:g} s per rank")
    rows = {}
    for ranks in [int(r) for r in args.ranks.split(",")]:
        for kind in args.servers.split(","):
            row = rows[kind, ranks] = run_case(kind, ranks, args.seconds, args.period)
            print(json.dumps(row) if args.json else show(row), flush=True)
        if {("tuned", ranks), ("untuned", ranks)} <= rows.keys():
            print(ratio(rows["tuned", ranks], rows["untuned", ranks]))
    return 0


def ratio(tuned: dict[str, object], untuned: dict[str, object]) -> str:
    def share(row: dict[str, object]) -> float:
        return float(row["ok"]) / max(1, float(row["posts"]))  # type: ignore[arg-type]

    def over(key: str) -> str:
        a, b = tuned[key], untuned[key]
        return f"{float(a) / float(b):.2f}" if a and b else "n/a"  # type: ignore[arg-type]

    return (
        f"  ratio tuned/untuned at {tuned['ranks']} ranks: 2xx share {share(tuned):.3f}/{share(untuned):.3f}, "
        f"p99 {over('p99_ms')}, snapshot max {over('snapshot_max_ms')}"
    )


if __name__ == "__main__":
    sys.exit(main())
