"""Cost of drawing one ``trainpulse top`` frame, by terminal size and rank count.

Each frame is laid out (variants measured, collapsed to fit) and rendered to
segments, as the live loop does every interval. Prints the median over
several frames and the ratio against the 8-rank frame at the same size (the
baseline), measured in the same process: the heat strip bins ranks, so
thousands of ranks should cost about what eight do.

    python bench/dashboard_frame.py
"""

from __future__ import annotations

import io
import statistics
import time

from rich.console import Console

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.dashboard.layout import render_screen
from trainpulse_otel.dashboard.view import History, Link, View
from trainpulse_otel.diagnose import Diagnosis, Health, Signal
from trainpulse_otel.publish.snapshot import Snapshot

FRAMES = 15
SIZES = ((80, 24), (160, 48))
RANKS = (8, 512, 4096)


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


if __name__ == "__main__":
    main()
