"""A job daemon fed by N nodes' OTLP exports: its CPU, tick duration, RSS, one scrape, and how soon it names faults.

Starts a real job daemon (``trainpulse daemon -mode none -interval 1s``) on
loopback and, from this process, POSTs to its ``/v1/metrics`` what N node
daemons' OTLP exporters send every ``--push-interval``, spread over the
interval as independent node daemons would send them (``--nodes-per-request K``:
K nodes' exports in one request, as the Collector gateway's batch processor
sends them; ``--gzip``: compressed, as its exporter does).

Each export is what a simulated node daemon sends: a ``SimulatedNode`` (8 GPUs,
its ranks renumbered to the job's global ranks) stored into the node's own
``LatestSamples``, collected by the OTel SDK from TrainPulse's instruments and
encoded by the SDK's OTLP encoder. The SDK takes ~7 ms an export, so only
``TEMPLATES`` nodes are built that way; every other node's exports are a
template's with its ``host.name``, ``hostname`` and ``rank`` attributes
rewritten (~0.5 ms), ``--distinct-pushes`` of them sent over again, so values
change between a node's pushes and the daemon cannot cache its way out.

Measured over ``--seconds`` after ``--warmup``: the daemon's CPU (psutil
``cpu_times`` delta over wall time, % of one core), each tick's duration (from
``/healthz``, polled every 0.2 s) and the POSTs' latency. Then one
``/metrics`` scrape (its time and size; RSS after it). Then two faults at
once: rank 5 of node N/2 runs 35 % slower from that moment (the simulator's
``rank_straggler`` with no ramp; its node's exports are built whole, through
the SDK), and node N/3 stops sending. ``/metrics`` is scraped every second
until ``trainpulse_signal_subject`` names the slow rank (``rank_straggler``)
and the silent host (``node_unreachable``): the seconds from the fault are
``straggler_named_s`` and ``node_lost_s`` (None: not within ``DETECT_LIMIT_S``).
The job runs beside a baseline job (``--baseline-nodes``) in the same process.

    python bench/job_daemon.py [--nodes 64] [--baseline-nodes 8] [--seconds 30] [--warmup 15] [--push-interval 1s]
        [--nodes-per-request K] [--gzip] [--distinct-pushes 3] [--raw] [--json]

Each node daemon judges its own GPUs and host and its export carries its verdict (its health score and active
signals' subjects), so the job daemon judges the ranks and the job and takes the nodes' verdicts; ``--raw``
sends measurements only (an OTel-only trainer, an old daemon: the small-job path), and the job daemon judges
every GPU itself.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.collect.sim.combine import scenario_named
from trainpulse_otel.collect.sim.knobs import Effect
from trainpulse_otel.diagnose import Diagnosis
from trainpulse_otel.diagnose.pipeline import PipelineResult
from trainpulse_otel.durations import parse_duration
from trainpulse_otel.publish.otel import DiagnosisPublisher
from trainpulse_otel.telemetry.instruments import METER_NAME, register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples

sys.path.insert(0, str(Path(__file__).resolve().parent))
from job_load import LoadGenerator, TickPoller, free_port, percentile, start_daemon

GPUS_PER_NODE = 8
#: Nodes whose exports the SDK builds; the others are theirs, retargeted.
TEMPLATES = 4
#: The slow rank's node-local rank (the simulator's rank_straggler slows GPU 5's rank).
SLOW_LOCAL_RANK = 5
#: How long the faults are watched for before they count as not named.
DETECT_LIMIT_S = 90.0
#: Seconds between the scrape after the window and the faults: the scrape's own cost settles first.
FAULT_GAP_S = 5.0


def hostname(node: int) -> str:
    return f"node-{node:04d}"


def node_exports(
    node: int, pushes: int, interval_s: float, start_ts: float, judging: bool, fault_at: float | None = None
) -> list:
    """One node daemon's OTLP exports, one a push: a simulated node's samples through the SDK and its encoder
    (with its daemon's verdict when ``judging``); with ``fault_at``, its rank 5 runs 35 % slower from then on."""
    scenario = None
    if fault_at is not None:
        base = scenario_named("rank_straggler")
        slow = Effect("rank_slowdown", 1.35, gpus=(SLOW_LOCAL_RANK,), ramp_s=1.0)
        scenario = replace(base, effects=(slow,)).starting_at(fault_at)
    sim = SimulatedNode(
        scenario or "healthy", seed=node, gpus=GPUS_PER_NODE, start_ts=start_ts, hostname=hostname(node)
    )
    latest = LatestSamples()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"host.name": hostname(node)}))
    meter = provider.get_meter(METER_NAME)
    register_measurements(meter, latest)
    if judging:  # a node daemon's export carries its verdict: its health, no signal active (the job judges ranks)
        DiagnosisPublisher(meter, _NoEvents()).publish(PipelineResult(Diagnosis(start_ts), (), False))
    exports = []
    for push in range(pushes):
        t = push * interval_s
        collected = sim.sample(t)
        if collected.training is not None:  # the node's ranks as the job numbers them
            ranks = tuple(replace(r, rank=node * GPUS_PER_NODE + r.rank) for r in collected.training.ranks)
            collected = replace(collected, training=replace(collected.training, ranks=ranks))
        latest.put(collected, start_ts + t)
        exports.append(encode_metrics(reader.get_metrics_data()).SerializeToString())
    provider.shutdown()
    return exports


def retarget(body: bytes, node: int) -> bytes:
    """A template node's export as node ``node`` sends it: its host and its ranks' numbers rewritten."""
    request = ExportMetricsServiceRequest.FromString(body)
    name = hostname(node)
    for resource_metrics in request.resource_metrics:
        for attribute in resource_metrics.resource.attributes:
            if attribute.key == "host.name":
                attribute.value.string_value = name
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points = metric.gauge.data_points if metric.HasField("gauge") else metric.sum.data_points
                for point in points:
                    for attribute in point.attributes:
                        if attribute.key == "rank":
                            attribute.value.int_value = node * GPUS_PER_NODE + attribute.value.int_value % 8
                        elif attribute.key == "hostname":
                            attribute.value.string_value = name
    return request.SerializeToString()


def build(nodes: int, pushes: int, interval_s: float, slow: int, fault_at: float, judging: bool) -> list[list[bytes]]:
    """Every node's exports: templates and the slow node through the SDK, the rest retargeted templates'."""
    start_ts = time.time()
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        same = [pushes, interval_s, start_ts, judging]
        templates = list(pool.map(node_exports, range(TEMPLATES), *([value] * TEMPLATES for value in same)))
        slow_future = pool.submit(
            node_exports,
            slow,
            int(fault_at / interval_s) + 2 + int(DETECT_LIMIT_S / interval_s),
            interval_s,
            start_ts,
            judging,
            fault_at,
        )
        exports = [
            templates[node] if node < TEMPLATES else [retarget(b, node) for b in templates[node % TEMPLATES]]
            for node in range(nodes)
        ]
        exports[slow] = slow_future.result()
    return exports


def batched(exports: list[list[bytes]], per_request: int, gzipped: bool, alone: int) -> list[list[bytes]]:
    """Each push's exports of ``per_request`` nodes at a time as one request (what the Collector's batch processor
    sends), node ``alone`` in the last request by itself (it will stop); a group keeps the pushes of its longest
    member, the others' cycling."""
    out = []
    others = [e for node, e in enumerate(exports) if node != alone]
    for group in [others[i : i + per_request] for i in range(0, len(others), per_request)] + [[exports[alone]]]:
        bodies = []
        for push in range(max(len(node) for node in group)):
            merged = ExportMetricsServiceRequest()
            for node in group:
                merged.MergeFromString(node[push % len(node)])  # repeated resource_metrics: appended
            body = merged.SerializeToString()
            bodies.append(gzip.compress(body) if gzipped else body)
        out.append(bodies)
    return out


@dataclass
class _NoEvents:
    def emit(self, *_args: object, **_kwargs: object) -> None:
        pass


@dataclass
class Run:
    nodes: int
    cpu_pct: float
    rss_mib: float
    tick_p50_ms: float
    tick_p99_ms: float
    post_p99_ms: float
    failed_posts: int
    scrape_ms: float
    scrape_series: int
    straggler_named_s: float | None
    node_lost_s: float | None


def scrape(port: int) -> tuple[str, float]:
    began = time.perf_counter()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=300).read().decode()
    return text, (time.perf_counter() - began) * 1e3


def named(text: str, signal: str, label: str) -> bool:
    pattern = rf'trainpulse_signal_subject\{{[^}}]*signal="{signal}"[^}}]*\}} 1'
    return any(label in m.group(0) for m in re.finditer(pattern, text))


def measure(nodes: int, args: argparse.Namespace) -> Run:
    interval, per = args.push_interval, args.nodes_per_request
    slow, silent = nodes // 2, nodes // 3
    fault_at = args.warmup + args.seconds + 2 * interval + FAULT_GAP_S  # seconds after the load starts
    print(f"building {nodes} nodes' exports ...", file=sys.stderr, flush=True)
    built = time.monotonic()
    requests = batched(
        build(nodes, args.distinct_pushes, interval, slow, fault_at, not args.raw), per, args.gzip, silent
    )
    print(f"  built in {time.monotonic() - built:.0f} s", file=sys.stderr, flush=True)
    port = free_port()
    proc = start_daemon(port)
    try:
        daemon = psutil.Process(proc.pid)
        load = LoadGenerator(port, requests, interval, args.gzip, stop_after={len(requests) - 1: fault_at})
        poller = TickPoller(port)
        load.start()
        poller.start()
        time.sleep(args.warmup)
        before, began = daemon.cpu_times(), time.monotonic()
        load.record = poller.record = True
        time.sleep(args.seconds)
        load.record = poller.record = False
        after, elapsed = daemon.cpu_times(), time.monotonic() - began
        poller.stop()
        text, scrape_ms = scrape(port)
        rss = daemon.memory_info().rss  # after a scrape: Prometheus scrapes it, and a scrape's memory stays
        series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        rank, host = f'rank="{slow * GPUS_PER_NODE + SLOW_LOCAL_RANK}"', f'hostname="{hostname(silent)}"'
        straggler_s = lost_s = None
        time.sleep(max(0.0, load.started + fault_at - time.monotonic()))
        while (straggler_s is None or lost_s is None) and time.monotonic() - load.started < fault_at + DETECT_LIMIT_S:
            text, _ = scrape(port)
            since = round(time.monotonic() - load.started - fault_at, 1)
            if straggler_s is None and named(text, "rank_straggler", rank):
                straggler_s = since
            if lost_s is None and named(text, "node_unreachable", host):
                lost_s = since
            time.sleep(1.0)
        load.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    busy = (after.user - before.user) + (after.system - before.system)
    ticks = list(poller.durations.values())
    latencies = sorted(load.latencies) or [0.0]
    return Run(
        nodes=nodes,
        cpu_pct=round(100.0 * busy / elapsed, 1),
        rss_mib=round(rss / 2**20, 1),
        tick_p50_ms=round(percentile(ticks, 0.5), 1),
        tick_p99_ms=round(percentile(ticks, 0.99), 1),
        post_p99_ms=round(percentile(latencies, 0.99) * 1e3, 1),
        failed_posts=load.failed,
        scrape_ms=round(scrape_ms),
        scrape_series=series,
        straggler_named_s=straggler_s,
        node_lost_s=lost_s,
    )


def show(run: Run) -> None:
    print(
        f"  {run.nodes:>4} nodes ({run.nodes * GPUS_PER_NODE:>5} GPUs and ranks): CPU {run.cpu_pct:5.1f}% of a core  "
        f"RSS {run.rss_mib:6.1f} MiB  tick p50 {run.tick_p50_ms:5.1f} ms p99 {run.tick_p99_ms:6.1f} ms  "
        f"POST p99 {run.post_p99_ms:6.1f} ms ({run.failed_posts} failed)  one /metrics scrape {run.scrape_ms} ms "
        f"({run.scrape_series} series)  slow rank named {run.straggler_named_s} s, silent node {run.node_lost_s} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--baseline-nodes", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--push-interval", type=parse_duration, default=1.0, help="each node's export interval")
    parser.add_argument("--nodes-per-request", type=int, default=1, help="nodes' exports in one request")
    parser.add_argument("--gzip", action="store_true", help="gzip each request, as the gateway's exporter does")
    parser.add_argument("--distinct-pushes", type=int, default=3, help="pushes built per node, then sent again")
    parser.add_argument(
        "--raw", action="store_true", help="nodes send measurements only (no verdict): the job daemon judges every GPU"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line: the job, its baseline, ratios")
    args = parser.parse_args()
    baseline, job = measure(args.baseline_nodes, args), measure(args.nodes, args)
    ratio = {
        "cpu": round(job.cpu_pct / max(baseline.cpu_pct, 0.1), 2),
        "tick_p99": round(job.tick_p99_ms / max(baseline.tick_p99_ms, 0.1), 2),
    }
    if args.json:
        print(
            json.dumps(
                {
                    **asdict(job),
                    "judging_nodes": not args.raw,
                    "push_interval_s": args.push_interval,
                    "nodes_per_request": args.nodes_per_request,
                    "gzip": args.gzip,
                    "baseline": asdict(baseline),
                    "ratio": ratio,
                }
            )
        )
        return
    sent = f"requests of {args.nodes_per_request} nodes' exports" + (" (gzip)" if args.gzip else "")
    print(f"job daemon, {sent} every {args.push_interval:g} s, {args.seconds} s after a {args.warmup} s warm-up:")
    show(baseline)
    show(job)
    print(f"  ratio {job.nodes}/{baseline.nodes} nodes: CPU {ratio['cpu']}x, tick p99 {ratio['tick_p99']}x")


if __name__ == "__main__":
    main()
