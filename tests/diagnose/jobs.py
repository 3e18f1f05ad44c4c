"""Node reports of a multi-node job for the job-view tests: every GPU's samples, a hot GPU, a slow rank."""

from __future__ import annotations

from dataclasses import replace

from tests.diagnose.builders import job
from trainpulse_otel.samples import NodeReport, TrainingSample

NODES = 4


GPUS_PER_NODE = 8


HOT = {"temperature_celsius": 88.0, "throttle_reasons": ("sw_thermal",), "sm_clock_mhz": 1480.0}


def node_reports(t: float, hot: dict | None = None, slow_rank: int | None = None) -> list[NodeReport]:
    """What each of 4 node daemons sends at ``t``: its 8 GPUs, its host, its 8 ranks; node-000 also the job."""
    slow = {slow_rank: {"step_time_ms": 1700.0 * 1.35}} if slow_rank is not None else {}
    frame = job(t, n_ranks=NODES * GPUS_PER_NODE, rank_changes=slow)
    out = []
    for n in range(NODES):
        hostname = f"node-{n:03d}"
        frame_n = job(t, seed=n, gpus=hot if n == 2 else None)
        ranks = tuple(r for r in frame.training.ranks if r.hostname == hostname)
        training = frame.training if n == 0 else TrainingSample(ranks=ranks)
        if n == 0:
            training = replace(training, ranks=ranks)
        out.append(NodeReport(hostname, gpus=frame_n.gpus, host=frame_n.host, training=training))
    return out
