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
``cpu_times`` delta over wall time, % of one core), its RSS at the end, its
tick duration (its own ``trainpulse.tick.duration`` histogram from
``/metrics``: the share of ticks over 50 ms is exact — 0.05 s is a bucket
bound —, p50/p99 are interpolated within buckets) and the POSTs' latency
p50/p99. The job (64 nodes by default) runs beside a baseline job (8 nodes)
in the same process, so the ratio shows how the daemon scales. Before each
run, the same exports are also decoded in this process (parse, the
receiver's decode, ``put_node``), node after node and second after second as
the daemon takes them: the median per export is the receive path without
HTTP, GIL contention or the tick.

    python bench/job_daemon.py [--nodes 64] [--baseline-nodes 8] [--seconds 60] [--warmup 15] [--distinct-seconds N]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
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
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.receive import PROTOBUF, OtlpReceiver, parse_request
from trainpulse_otel.telemetry.instruments import METER_NAME, register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples

GPUS_PER_NODE = 8
TICK_METRIC = "trainpulse_tick_duration_seconds"
#: The tick budget the issue sets (p99), a bound of the tick-duration histogram.
TICK_BUDGET_S = 0.05


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


@dataclass
class Run:
    nodes: int
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


def decode_in_process(exports: list[list[bytes]], seconds: int = 10) -> float:
    """The median µs per export of parse + decode + put_node over the first ``seconds`` (the first 2 not timed:
    the receiver reads each node's attribute sets then)."""
    receiver, latest, timed = OtlpReceiver(), LatestSamples(), []
    for second in range(min(seconds, len(exports[0]))):
        for node, node_exports in enumerate(exports):
            began = time.perf_counter()
            decoded = receiver.decode(parse_request(node_exports[second], PROTOBUF))
            for report in decoded.reports:
                latest.put_node(report, 1000.0 + second + node / len(exports))
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


def tick_buckets(port: int) -> dict[float, float]:
    """The daemon's tick-duration histogram: cumulative count per upper bound (``inf`` for all)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=300).read().decode()
    out = {}
    for match in re.finditer(TICK_METRIC + r'_bucket\{[^}]*le="([^"]+)"[^}]*\} ([0-9.e+]+)', text):
        out[float(match.group(1))] = float(match.group(2))
    return out


def quantile(buckets: dict[float, float], q: float) -> float:
    """The q-quantile of a cumulative histogram, interpolated linearly within its bucket (as Prometheus does)."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if bound == float("inf"):
                return lower
            inside = buckets[bound] - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, buckets[bound]
    return lower


class LoadGenerator:
    """Every second, each node's export of that second, POSTed at that node's own phase within the second
    (for ``seconds`` seconds: a node's exports over again once they run out)."""

    def __init__(self, port: int, exports: list[list[bytes]], seconds: int, connections: int = 8) -> None:
        self.port = port
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
        headers = {"Content-Type": "application/x-protobuf"}
        second = 0
        while not self._stop.is_set() and second < self.seconds:
            for node in nodes:  # node i sends at i/N of each second
                due = self.started + second + node / len(self.exports)
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                began = time.perf_counter()
                try:
                    body = self.exports[node][second % len(self.exports[node])]
                    conn.request("POST", "/v1/metrics", body, headers)
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


def measure(nodes: int, seconds: int, warmup: int, distinct_seconds: int | None = None) -> Run:
    built_seconds = min(seconds + warmup + 2, distinct_seconds or seconds + warmup + 2)
    print(f"building {nodes} nodes x {built_seconds} s of exports ...", file=sys.stderr, flush=True)
    built = time.monotonic()
    with ProcessPoolExecutor(os.cpu_count()) as pool:  # the SDK takes ~15-30 ms per export: build before the run
        exports = list(pool.map(node_exports, range(nodes), repeat(built_seconds), repeat(time.time())))
    print(f"  built in {time.monotonic() - built:.0f} s", file=sys.stderr, flush=True)
    decode_us = decode_in_process(exports)
    port = free_port()
    proc = start_daemon(port)
    try:
        daemon = psutil.Process(proc.pid)
        load = LoadGenerator(port, exports, seconds + warmup + 2)
        load.start()
        time.sleep(warmup)
        ticks_before = tick_buckets(port)  # scraped outside the timed window: a scrape is not the load
        before, began = daemon.cpu_times(), time.monotonic()
        load.record = True
        time.sleep(seconds)
        load.record = False
        after, elapsed = daemon.cpu_times(), time.monotonic() - began
        rss = daemon.memory_info().rss
        scraped = time.perf_counter()
        ticks_after = tick_buckets(port)
        scrape_ms = (time.perf_counter() - scraped) * 1e3
        load.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    busy = (after.user - before.user) + (after.system - before.system)
    ticks = {bound: ticks_after[bound] - ticks_before.get(bound, 0.0) for bound in ticks_after}
    total = ticks[float("inf")]
    latencies = sorted(load.latencies)
    return Run(
        nodes=nodes,
        cpu_percent=100.0 * busy / elapsed,
        rss_mib=rss / 2**20,
        ticks=int(total),
        tick_p50_ms=quantile(ticks, 0.5) * 1e3,
        tick_p99_ms=quantile(ticks, 0.99) * 1e3,
        ticks_over_budget=(total - ticks[TICK_BUDGET_S]) / total if total else 0.0,
        post_p50_ms=latencies[len(latencies) // 2] * 1e3,
        post_p99_ms=latencies[int(len(latencies) * 0.99)] * 1e3,
        export_kb=statistics.mean(len(e) for e in exports[0]) / 1e3,
        failed_posts=load.failed,
        scrape_ms=scrape_ms,
        decode_us=decode_us,
    )


def show(run: Run) -> None:
    print(
        f"  {run.nodes:>3} nodes ({run.nodes * GPUS_PER_NODE:>4} GPUs, ranks): "
        f"CPU {run.cpu_percent:5.1f}% of a core  RSS {run.rss_mib:6.1f} MiB  "
        f"tick p50 {run.tick_p50_ms:5.1f} ms p99 {run.tick_p99_ms:5.1f} ms "
        f"({100 * run.ticks_over_budget:.1f}% of {run.ticks} over {TICK_BUDGET_S * 1e3:.0f} ms)  "
        f"POST p50 {run.post_p50_ms:5.1f} ms p99 {run.post_p99_ms:5.1f} ms  "
        f"({run.export_kb:.0f} kB each, {run.failed_posts} failed)  one /metrics scrape {run.scrape_ms:.0f} ms  "
        f"decode in-process {run.decode_us:.0f} us an export"
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
    args = parser.parse_args()
    baseline = measure(args.baseline_nodes, args.seconds, args.warmup, args.distinct_seconds)
    job = measure(args.nodes, args.seconds, args.warmup, args.distinct_seconds)
    print(f"job daemon, one OTLP/HTTP export per node per second, {args.seconds} s after a {args.warmup} s warm-up:")
    show(baseline)
    show(job)
    print(
        f"  ratio {job.nodes}/{baseline.nodes} nodes: CPU {job.cpu_percent / baseline.cpu_percent:.1f}x, "
        f"tick p50 {job.tick_p50_ms / baseline.tick_p50_ms:.1f}x, RSS {job.rss_mib / baseline.rss_mib:.2f}x"
    )


if __name__ == "__main__":
    main()
