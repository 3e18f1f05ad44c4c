"""How fast `trainpulse replay` diagnoses a job across nodes, against a one-node trace in the same process.

Writes the trace a job daemon records for ``--nodes`` simulated nodes of 8 GPUs (one `gpus` and one `host`
line per node a tick, other nodes' with ``"node"``; one `training` line with every rank of the job), GPU 2 on
``node-021`` overheating behind global rank 170 from 90 s on; and a one-node trace of the same length. Replays
each ``--runs`` times and prints the median wall time, ticks/s, the multiple of real time, the ratio to the
one-node replay, and the job's top cause — which must name GPU 2 on node-021 and rank 170.

    python bench/job_replay.py [--nodes 32] [--seconds 300] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import replace

from replay_speed import write_trace  # bench/ is the script's own directory

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.collect.sim.scenarios import SCENARIOS, Effect
from trainpulse_otel.collect.trace import bounded_lines, encode_line, read_trace
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime import discover, open_replay
from trainpulse_otel.runtime.replay import ReplayResult, replay

PLUGINS = discover(autoload=False)
START_TS = 1_764_400_000.0
FAULTY_NODE, HOT_GPU = 21, 2
#: GPU 2's cooling fails (the thermal_instability scenario moved from GPU 5 to GPU 2).
HOT = replace(SCENARIOS["thermal_instability"], effects=(Effect("cooling_loss", 1.75, gpus=(HOT_GPU,), ramp_s=60.0),))


def write_job_trace(path: str, nodes: int, seconds: int) -> None:
    """What a job daemon records for a job of ``nodes`` simulated nodes (node 0 its own, without ``node``)."""
    sims = [
        SimulatedNode(HOT if i == FAULTY_NODE else "healthy", nodes=nodes, node_rank=i, start_ts=START_TS)
        for i in range(nodes)
    ]
    with open(path, "w", encoding="utf-8") as fh:
        for t in range(seconds):
            ts = START_TS + t
            ranks = []
            job = None
            for i, sim in enumerate(sims):
                seen = sim.sample(float(t))
                node = None if i == 0 else sim.hostname
                fh.write(encode_line(ts, "gpus", seen.gpus, node))
                fh.write(encode_line(ts, "host", seen.host, node))
                if seen.training is not None:
                    ranks.extend(seen.training.ranks)
                    job = job or (seen.training if i == 0 else None)
            if job is not None:
                fh.write(encode_line(ts, "training", replace(job, ranks=tuple(ranks))))


def replay_file(path: str) -> ReplayResult:
    with open(path, "rb") as fh:
        return replay(read_trace(bounded_lines(fh), []), open_replay(Settings(), PLUGINS))


def timed(path: str, runs: int) -> tuple[float, ReplayResult]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = replay_file(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        job_path, node_path = os.path.join(tmp, "job.jsonl"), os.path.join(tmp, "node.jsonl")
        write_job_trace(job_path, args.nodes, args.seconds)
        write_trace(node_path, args.seconds)  # replay_speed's healthy one-node trace: the baseline
        size = os.path.getsize(job_path) / 1e6
        node_s, _ = timed(node_path, args.runs)
        job_s, result = timed(job_path, args.runs)
    print(f"{args.seconds} s of a {args.nodes}-node job ({args.nodes * 8} GPUs and ranks), {size:.1f} MB")
    print(f"  one node : {node_s:6.2f} s  {args.seconds / node_s:7.0f} ticks/s")
    print(
        f"  job      : {job_s:6.2f} s  {args.seconds / job_s:7.0f} ticks/s  "
        f"{args.seconds / job_s:5.0f}x real time  {job_s / node_s:5.1f}x the one-node replay"
    )
    top = result.diagnosis.root_causes[0] if result.diagnosis.root_causes else None
    print(f"  top cause: {top.cause if top else None} {top.subject if top else {}}")


if __name__ == "__main__":
    main()
