"""Frames of a job's ranks for the detectors' tests: heartbeats, healthy and slowed step times."""

from __future__ import annotations

import random
from dataclasses import replace

from tests.diagnose.builders import T0, job
from trainpulse_otel.samples import Frame, RankSample, TrainingSample


def heartbeat_frame(t: float, step: int, phases: dict[int, str], since: float, **frame: object) -> Frame:
    """A frame whose job-level report stopped at ``step`` and whose ranks beat in ``phases``."""
    base = job(t, training={"global_step": step, "timestamp": T0}, **frame)  # the same report, repeated
    ranks = tuple(
        replace(r, global_step=step, phase=phases.get(r.rank, "all_reduce"), phase_since=T0 + since)
        for r in base.training.ranks
    )
    return replace(base, training=replace(base.training, ranks=ranks))


BUSY_MS = 1700.0


ALLREDUCE_MS = 105.0


def report(t: float, n: int, compute, convention: str = "own_busy", allreduce_ms: float = ALLREDUCE_MS) -> Frame:
    """A training report with per-rank compute times ``compute(rank, rng)`` in the given convention."""
    rng = random.Random(hash((t, n)))
    work = [compute(r, rng) for r in range(n)]
    data = [4.0 * rng.uniform(0.8, 1.2) for _ in range(n)]
    arrivals = [d + c for d, c in zip(data, work, strict=True)]
    last = max(arrivals)
    wall = last + allreduce_ms + 12.0
    ranks = []
    for r in range(n):
        sync = last - arrivals[r] + 1.5
        step = work[r] + allreduce_ms if convention == "own_busy" else wall
        ranks.append(
            RankSample(
                rank=r,
                gpu_index=r % 8,
                hostname=f"node-{r // 8:03d}",
                step_time_ms=step,
                data_wait_ms=data[r],
                sync_wait_ms=sync,
                all_reduce_wait_ms=allreduce_ms,
            )
        )
    training = TrainingSample(
        timestamp=T0 + t, global_step=1000 + int(t), hostname="node-000", step_time_ms=wall, ranks=tuple(ranks)
    )
    return Frame(ts=T0 + t, training=training)


def healthy(r: int, rng: random.Random) -> float:
    return BUSY_MS * (1.0 + 0.004 * ((r * 7919) % 11 - 5) / 5) * rng.lognormvariate(0.0, 0.008)


def slow(rank: int, factor: float, from_t: float, t: float):
    return lambda r, rng: healthy(r, rng) * (factor if r == rank and t >= from_t else 1.0)
