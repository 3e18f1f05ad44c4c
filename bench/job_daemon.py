"""A job daemon fed by N nodes' OTLP exports every second: its CPU, tick duration, RSS and request latency.

Starts a real job daemon (``trainpulse daemon -mode none -interval 1s``) on
loopback and, from this process, POSTs to its ``/v1/metrics`` one OTLP/HTTP
protobuf export per node per second, spread over the second as independent
node daemons would send them. Each export is what a simulated node daemon's
OTLP exporter sends: a ``SimulatedNode`` (8 GPUs, its 8 ranks renumbered to
the job's global ranks ``i*8 … i*8+7``) stored into the node's own
``LatestSamples``, collected by the OTel SDK from TrainPulse's instruments and
encoded by the SDK's OTLP encoder — built before the run, one per node per
second, so every second's values differ (the daemon cannot cache its way
out) and the load generator costs almost nothing while the daemon is timed.

Measured over ``--seconds`` after ``--warmup``: the daemon's CPU (psutil
``cpu_times`` delta over wall time, % of one core), its RSS at the end
(after one ``/metrics`` scrape), its tick duration (each tick's
``last_tick_duration_ms`` from ``/healthz``, polled every 0.2 s, ~0.1 % of a
core; not its ``/metrics`` histogram: a scrape of a 64-node job daemon takes
a second of its CPU and slows the ticks beside it, so scraping around the
window put a slow tick in it) and the POSTs' latency p50/p99. One
``/metrics`` scrape after the window says what a scrape costs. The job (64
nodes by default) runs beside a baseline job (8 nodes) in the same process,
so the ratio shows how the daemon scales. Before each run, the same requests
are also decoded in this process (parse, the receiver's decode,
``put_node``), one after another as the daemon takes them: the median per
request is the receive path without HTTP, GIL contention or the tick.

``--nodes-per-request K`` sends K nodes' exports in one request, as the
OpenTelemetry Collector gateway's batch processor does
(``collector_config/otelcol/job-gateway.yaml``: each node keeps its own
resource), and ``--gzip`` compresses each as its exporter does: the
deployment the docs describe, against 1 (every node daemon pushing to the
job daemon itself).

    python bench/job_daemon.py [--nodes 64] [--baseline-nodes 8] [--seconds 60] [--warmup 15] [--distinct-seconds N]
        [--nodes-per-request K] [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import repeat

import psutil
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.receive import PROTOBUF, OtlpReceiver, parse_request
from trainpulse_otel.telemetry.instruments import METER_NAME, register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples

GPUS_PER_NODE = 8
#: The tick budget the issue sets (p99).
TICK_BUDGET_MS = 50.0
#: How often ``/healthz`` is asked for the newest tick's duration (a tick a second: none is missed).
POLL_S = 0.2


def node_exports(node: int, seconds: int, start_ts: float) -> list[bytes]:
    """One node daemon's OTLP exports, one per second: a simulated node's samples through the SDK and its encoder."""
    hostname = f"node-{node:03d}"
    sim = SimulatedNode("healthy", seed=node, gpus=GPUS_PER_NODE, start_ts=start_ts, hostname=hostname)
    latest = LatestSamples()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"host.name": hostname}))
    register_measurements(provider.get_meter(METER_NAME), latest)
    exports = []
    for t in range(seconds):
        collected = sim.sample(float(t))
        if collected.training is not None:  # the node's ranks as the job numbers them
            ranks = tuple(replace(r, rank=node * GPUS_PER_NODE + r.rank) for r in collected.training.ranks)
            collected = replace(collected, training=replace(collected.training, ranks=ranks))
        latest.put(collected, start_ts + t)
        exports.append(encode_metrics(reader.get_metrics_data()).SerializeToString())
    provider.shutdown()
    return exports


def batched(exports: list[list[bytes]], per_request: int) -> list[list[bytes]]:
    """Each second's exports of ``per_request`` nodes at a time as one request, their resources side by side
    (what the Collector's batch processor sends); one per node when ``per_request`` is 1."""
    if per_request == 1:
        return exports
    out = []
    for first in range(0, len(exports), per_request):
        group = exports[first : first + per_request]
        bodies = []
        for second in range(len(group[0])):
            merged = ExportMetricsServiceRequest()
            for node in group:
                merged.MergeFromString(node[second])  # repeated resource_metrics: appended
            bodies.append(merged.SerializeToString())
        out.append(bodies)
    return out


@dataclass
class Run:
    nodes: int
    nodes_per_request: int
    cpu_percent: float
    rss_mib: float
    ticks: int
    tick_p50_ms: float
    tick_p99_ms: float
    ticks_over_budget: float
    post_p50_ms: float
    post_p99_ms: float
    export_kb: float
    failed_posts: int
    scrape_ms: float
    decode_us: float


def decode_in_process(requests: list[list[bytes]], gzipped: bool, seconds: int = 10) -> float:
    """The median µs per request of (gunzip +) parse + decode + put_node over the first ``seconds`` (the first 2
    not timed: the receiver reads each node's attribute sets then)."""
    receiver, latest, timed = OtlpReceiver(), LatestSamples(), []
    for second in range(min(seconds, len(requests[0]))):
        for slot, bodies in enumerate(requests):
            began = time.perf_counter()
            body = gzip.decompress(bodies[second]) if gzipped else bodies[second]
            decoded = receiver.decode(parse_request(body, PROTOBUF))
            for report in decoded.reports:
                latest.put_node(report, 1000.0 + second + slot / len(requests))
            if second >= 2:
                timed.append(time.perf_counter() - began)
    return statistics.median(timed) * 1e6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(port: int) -> subprocess.Popen:
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


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of ``values``, nearest rank (of 60 ticks, p99 is the slowest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


class LoadGenerator:
    """Every second, each node's request of that second (or each batch of nodes'), POSTed at its own phase within
    the second (for ``seconds`` seconds: its requests over again once they run out)."""

    def __init__(
        self, port: int, exports: list[list[bytes]], seconds: int, gzipped: bool, connections: int = 8
    ) -> None:
        self.port = port
        self.headers = {"Content-Type": "application/x-protobuf", **({"Content-Encoding": "gzip"} if gzipped else {})}
        self.exports = exports
        self.seconds = seconds
        self.latencies: list[float] = []
        self.failed = 0
        self.record = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        per = -(-len(exports) // connections)
        groups = [range(i, min(i + per, len(exports))) for i in range(0, len(exports), per)]
        self._threads = [threading.Thread(target=self._drive, args=(g,), daemon=True) for g in groups]

    def start(self) -> None:
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _drive(self, nodes: range) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        second = 0
        while not self._stop.is_set() and second < self.seconds:
            for node in nodes:  # node i sends at i/N of each second
                due = self.started + second + node / len(self.exports)
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                began = time.perf_counter()
                try:
                    body = self.exports[node][second % len(self.exports[node])]
                    conn.request("POST", "/v1/metrics", body, self.headers)
                    response = conn.getresponse()
                    response.read()
                    ok = response.status == 200
                except OSError:
                    conn.close()
                    conn, ok = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30), False
                with self._lock:
                    if self.record:
                        self.latencies.append(time.perf_counter() - began)
                        self.failed += 0 if ok else 1
            second += 1


def measure(
    nodes: int,
    seconds: int,
    warmup: int,
    distinct_seconds: int | None = None,
    per_request: int = 1,
    gzipped: bool = False,
) -> Run:
    built_seconds = min(seconds + warmup + 2, distinct_seconds or seconds + warmup + 2)
    print(f"building {nodes} nodes x {built_seconds} s of exports ...", file=sys.stderr, flush=True)
    built = time.monotonic()
    with ProcessPoolExecutor(os.cpu_count()) as pool:  # the SDK takes ~15-30 ms per export: build before the run
        exports = list(pool.map(node_exports, range(nodes), repeat(built_seconds), repeat(time.time())))
    requests = batched(exports, per_request)
    if gzipped:
        requests = [[gzip.compress(body) for body in bodies] for bodies in requests]
    print(f"  built in {time.monotonic() - built:.0f} s", file=sys.stderr, flush=True)
    decode_us = decode_in_process(requests, gzipped)
    port = free_port()
    proc = start_daemon(port)
    try:
        daemon = psutil.Process(proc.pid)
        load = LoadGenerator(port, requests, seconds + warmup + 2, gzipped)
        poller = TickPoller(port)
        load.start()
        poller.start()
        time.sleep(warmup)
        before, began = daemon.cpu_times(), time.monotonic()
        load.record = poller.record = True
        time.sleep(seconds)
        load.record = poller.record = False
        after, elapsed = daemon.cpu_times(), time.monotonic() - began
        poller.stop()
        scraped = time.perf_counter()
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=300).read()
        scrape_ms = (time.perf_counter() - scraped) * 1e3
        rss = daemon.memory_info().rss  # after a scrape: Prometheus scrapes it, and a scrape's memory stays
        load.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    busy = (after.user - before.user) + (after.system - before.system)
    ticks = list(poller.durations.values())
    latencies = sorted(load.latencies)
    return Run(
        nodes=nodes,
        nodes_per_request=per_request,
        cpu_percent=100.0 * busy / elapsed,
        rss_mib=rss / 2**20,
        ticks=len(ticks),
        tick_p50_ms=percentile(ticks, 0.5),
        tick_p99_ms=percentile(ticks, 0.99),
        ticks_over_budget=sum(t > TICK_BUDGET_MS for t in ticks) / len(ticks),
        post_p50_ms=latencies[len(latencies) // 2] * 1e3,
        post_p99_ms=latencies[int(len(latencies) * 0.99)] * 1e3,
        export_kb=statistics.mean(len(e) for e in requests[0]) / 1e3,
        failed_posts=load.failed,
        scrape_ms=scrape_ms,
        decode_us=decode_us,
    )


def show(run: Run) -> None:
    per = f", {run.nodes_per_request} a request" if run.nodes_per_request > 1 else ""
    print(
        f"  {run.nodes:>3} nodes ({run.nodes * GPUS_PER_NODE:>4} GPUs, ranks{per}): "
        f"CPU {run.cpu_percent:5.1f}% of a core  RSS {run.rss_mib:6.1f} MiB  "
        f"tick p50 {run.tick_p50_ms:5.1f} ms p99 {run.tick_p99_ms:5.1f} ms "
        f"({100 * run.ticks_over_budget:.1f}% of {run.ticks} over {TICK_BUDGET_MS:.0f} ms)  "
        f"POST p50 {run.post_p50_ms:5.1f} ms p99 {run.post_p99_ms:5.1f} ms  "
        f"({run.export_kb:.0f} kB each, {run.failed_posts} failed)  one /metrics scrape {run.scrape_ms:.0f} ms  "
        f"decode in-process {run.decode_us:.0f} us a request"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--baseline-nodes", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument(
        "--distinct-seconds",
        type=int,
        default=None,
        help="build only this many seconds of exports per node and send them over again (a warm-up of 300 s "
        "or more fills the daemon's 300-frame window: its steady-state RSS)",
    )
    parser.add_argument(
        "--nodes-per-request",
        type=int,
        default=1,
        help="nodes' exports in one request, as a Collector gateway's batch processor sends them (default 1: "
        "each node daemon pushes itself; the gateway's batch/job sends ~7)",
    )
    parser.add_argument("--gzip", action="store_true", help="gzip each request, as the gateway's exporter does")
    args = parser.parse_args()
    per = args.nodes_per_request
    baseline = measure(args.baseline_nodes, args.seconds, args.warmup, args.distinct_seconds, per, args.gzip)
    job = measure(args.nodes, args.seconds, args.warmup, args.distinct_seconds, per, args.gzip)
    sent = "one OTLP/HTTP export per node" if per == 1 else f"OTLP/HTTP requests of {per} nodes' exports"
    sent += " (gzip)" if args.gzip else ""
    print(f"job daemon, {sent} every second, {args.seconds} s after a {args.warmup} s warm-up:")
    show(baseline)
    show(job)
    print(
        f"  ratio {job.nodes}/{baseline.nodes} nodes: CPU {job.cpu_percent / baseline.cpu_percent:.1f}x, "
        f"tick p50 {job.tick_p50_ms / baseline.tick_p50_ms:.1f}x, RSS {job.rss_mib / baseline.rss_mib:.2f}x"
    )


if __name__ == "__main__":
    main()
