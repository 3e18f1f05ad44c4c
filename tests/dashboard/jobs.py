"""Job daemons' snapshots for the dashboard tests: N simulated nodes (``-sim-nodes N``) sampled at one
instant, their GPUs tagged with their node, every rank with its host, and a hand-written diagnosis in the
job daemon's vocabulary (a hot GPU on one node that its rank's straggling comes from; a silent node)."""

from __future__ import annotations

from dataclasses import replace

from trainpulse_otel.collect.sim import SimCollector
from trainpulse_otel.collect.sim.placement import node_hostname
from trainpulse_otel.diagnose import Diagnosis, Health, RootCause, Signal
from trainpulse_otel.publish.snapshot import Snapshot
from trainpulse_otel.samples import NodeSample

TS = 1_764_400_120.0
HOT = {"temperature_celsius": 89.0, "throttle_reasons": ("sw_thermal",), "sm_clock_mhz": 1410.0}


def job_snapshot(nodes: int, hot: str = "node-002", stale: tuple[str, ...] = ("node-003",)) -> dict:
    """The ``/v1/snapshot`` body of a job daemon (``-mode none``) over ``nodes`` simulated nodes: GPU 3 of
    ``hot`` throttles behind rank ``8*i+3`` (the top cause), the ``stale`` nodes went silent 20 s ago."""
    gpus, samples, ranks, job = [], [], [], None
    for i in range(nodes):
        hostname = node_hostname(i)
        seen = SimCollector(nodes=nodes, node_rank=i).collect(TS)
        node_gpus = [replace(g, node=hostname, **(HOT if hostname == hot and g.index == 3 else {})) for g in seen.gpus]
        gpus += node_gpus
        samples.append(NodeSample(hostname, TS - 20.0 if hostname in stale else TS - 0.4, 1.0, seen.host))
        ranks += seen.training.ranks
        job = job or seen.training
    slow = 8 * int(hot.rsplit("-", 1)[1]) + 3
    subject = {"gpu_index": 3, "hostname": hot, "rank": slow}
    signals = [
        Signal("thermal_instability", "critical", TS - 60, f"GPU 3 on {hot} throttles at 89°C", subject),
        Signal("rank_straggler", "warning", TS - 50, f"rank {slow} on {hot} is 30% slower", subject),
        *(Signal("node_unreachable", "critical", TS - 17, f"{h} silent for 20s", {"hostname": h}) for h in stale),
    ]
    cause = RootCause("gpu_thermal_throttling", 0.8, f"GPU 3 on {hot} throttles", ("thermal_instability",), subject)
    diagnosis = Diagnosis(TS, Health(38.0, "critical"), tuple(signals), (cause,))
    snapshot = Snapshot(
        TS,
        "none",
        gpus=tuple(gpus),
        training=replace(job, ranks=tuple(sorted(ranks, key=lambda r: r.rank))),
        diagnosis=diagnosis,
        nodes=tuple(samples),
    )
    return snapshot.to_dict()
