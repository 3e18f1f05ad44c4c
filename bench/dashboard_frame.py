"""Cost of drawing one ``trainpulse top`` frame, by terminal size and rank count.

Each frame is laid out (variants measured, collapsed to fit) and rendered to
segments, as the live loop does every interval. Prints the median over
several frames and the ratio against the 8-rank frame at the same size (the
baseline), measured in the same process: the heat strip bins ranks, so
thousands of ranks should cost about what eight do. Then a job daemon's frame:
64 simulated nodes x 8 GPUs, 512 ranks (the node strip, the worst node's GPUs),
against the single-node frame at the same size.

    python bench/dashboard_frame.py
"""

from __future__ import annotations

import io
import statistics
import time
from dataclasses import replace

from rich.console import Console

from trainpulse_otel.collect.sim import SimCollector, SimulatedNode
from trainpulse_otel.collect.sim.placement import node_hostname
from trainpulse_otel.dashboard.layout import render_screen
from trainpulse_otel.dashboard.view import History, Link, View
from trainpulse_otel.diagnose import Diagnosis, Health, RootCause, Signal
from trainpulse_otel.publish.snapshot import Snapshot
from trainpulse_otel.samples import NodeSample

FRAMES = 15
SIZES = ((80, 24), (160, 48))
RANKS = (8, 512, 4096)
JOB_NODES = 64


def sim_history(ranks: int) -> tuple[History, Snapshot]:
    """Two minutes of a straggler job, as the client-side ring would hold them, and the newest snapshot."""
    node = SimulatedNode("rank_straggler", ranks=ranks)
    history = History()
    straggler = Signal("rank_straggler", "warning", node.start_ts + 100, "rank 5 is slow", {"rank": 5, "gpu_index": 5})
    diagnosis = Diagnosis(health=Health(64.0, "degraded"), signals=(straggler,))
    snapshot = Snapshot(None, "sim")
    for t in range(121):
        c = node.sample(float(t))
        snapshot = Snapshot(
            node.start_ts + t, "sim", gpus=c.gpus or (), host=c.host, training=c.training, diagnosis=diagnosis
        )
        history.add(snapshot)
    return history, snapshot


def job_history(nodes: int) -> tuple[History, Snapshot]:
    """A job daemon's snapshot over ``nodes`` simulated nodes (``-sim-nodes``), one silent, the top cause on
    node-002, and a history of its job-level frames (the sparklines' ring holds no per-node data)."""
    ts = 1_764_400_120.0
    gpus, samples, ranks, job = [], [], [], None
    for i in range(nodes):
        hostname = node_hostname(i)
        seen = SimCollector("rank_straggler", nodes=nodes, node_rank=i).collect(ts)
        gpus += [replace(g, node=hostname) for g in seen.gpus or ()]
        samples.append(NodeSample(hostname, ts - (20.0 if i == 3 else 0.4), 1.0, seen.host))
        ranks += seen.training.ranks if seen.training else ()
        job = job or seen.training
    subject = {"rank": 21, "gpu_index": 5, "hostname": "node-002"}
    diagnosis = Diagnosis(
        ts,
        Health(40.0, "critical"),
        (
            Signal("rank_straggler", "warning", ts - 20, "rank 21 on node-002 is slow", subject),
            Signal("node_unreachable", "critical", ts - 17, "node-003 is silent", {"hostname": "node-003"}),
        ),
        (RootCause("straggler_rank", 0.7, "rank 21 on node-002", ("rank_straggler",), subject),),
    )
    training = replace(job, ranks=tuple(sorted(ranks, key=lambda r: r.rank)))
    latest = Snapshot(ts, "none", gpus=tuple(gpus), training=training, diagnosis=diagnosis, nodes=tuple(samples))
    history = History()
    for t in range(120, 0, -1):
        history.add(replace(latest, timestamp=ts - t, gpus=(), nodes=(), training=replace(training, ranks=())))
    history.add(latest)
    return history, latest


def frame_cost(history: History, latest: Snapshot, width: int, height: int) -> float:
    """Median seconds to lay out and render one frame."""
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True)
    view = View(latest, history, Link("bench", "local", 0.0), latest.timestamp or 0.0)
    costs = []
    for _ in range(FRAMES):
        start = time.perf_counter()
        console.render_lines(render_screen(view, console, width, height))
        costs.append(time.perf_counter() - start)
    return statistics.median(costs)


def main() -> None:
    histories = {ranks: sim_history(ranks) for ranks in RANKS}
    for width, height in SIZES:
        baseline = frame_cost(*histories[RANKS[0]], width, height)
        for ranks in RANKS:
            cost = baseline if ranks == RANKS[0] else frame_cost(*histories[ranks], width, height)
            print(f"{width}x{height} {ranks:5d} ranks: {cost * 1e3:7.2f} ms/frame  ({cost / baseline:.2f}x 8 ranks)")
    job = job_history(JOB_NODES)
    for width, height in SIZES:
        baseline = frame_cost(*histories[RANKS[0]], width, height)
        cost = frame_cost(*job, width, height)
        print(
            f"{width}x{height} job of {JOB_NODES} nodes x 8 GPUs, {JOB_NODES * 8} ranks: {cost * 1e3:7.2f} ms/frame"
            f"  ({cost / baseline:.2f}x the single-node frame)"
        )


if __name__ == "__main__":
    main()
