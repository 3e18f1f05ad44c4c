"""What the report costs: the per-tick record a daemon keeps (``RunSeries.add``), its memory when full, and the
time and size of a page.

``RunSeries.add`` over frames of 8 and 1,024 ranks (8 and 64 GPUs), one signal and one cause a tick: the median of
the kept ticks and of the thinned ones (every other tick once past the bound), and the record's memory after
5,000 ticks (tracemalloc, a second run). Then the page of a 1,200-point record of 1,024 ranks: the seconds to draw it and its size.

    python bench/report.py
"""

from __future__ import annotations

import statistics
import time
import tracemalloc

from trainpulse_otel.diagnose import Diagnosis, PipelineResult, RootCause, Signal
from trainpulse_otel.diagnose.types import Health
from trainpulse_otel.report.command import render_run
from trainpulse_otel.report.series import RunSeries
from trainpulse_otel.samples import Frame, GpuSample, RankSample, TrainingSample

T0 = 1_764_400_000.0


def frame(ts: float, ranks: int, gpus: int) -> Frame:
    rank_samples = tuple(
        RankSample(rank=r, gpu_index=r % 8, hostname=f"node{r // 8}", step_time_ms=1000.0 + (r % 7))
        for r in range(ranks)
    )
    training = TrainingSample(step_time_ms=1010.0, tokens_per_sec=7e4, mfu=0.45, data_wait_ms=5.0, ranks=rank_samples)
    gpu_samples = tuple(
        GpuSample(index=i % 8, node=f"node{i // 8}", temperature_celsius=70.0, sm_clock_mhz=1980.0, power_watts=650.0)
        for i in range(gpus)
    )
    return Frame(ts, gpu_samples, None, training)


def result(ts: float) -> PipelineResult:
    signal = Signal("rank_straggler", "warning", ts, "rank 5 is slow", {"rank": 5}, {"slowdown": 1.3})
    cause = RootCause("straggler_rank", 0.8, "rank 5 is slow", ("rank_straggler",), {"rank": 5}, "drain it")
    return PipelineResult(Diagnosis(ts, Health(80.0, "degraded"), (signal,), (cause,)))


def per_tick(ranks: int, gpus: int, ticks: int = 5000) -> tuple[float, float, int]:
    """Median µs of a kept tick and of a thinned one, and the record's bytes after ``ticks``."""
    frames = [frame(T0 + i, ranks, gpus) for i in range(50)]
    kept: list[float] = []
    thinned: list[float] = []
    fill(frames, ticks, kept, thinned)
    tracemalloc.start()
    held = fill(frames, ticks, [], [])  # alive while measured
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del held
    return statistics.median(kept) * 1e6, statistics.median(thinned or [0.0]) * 1e6, size


def fill(frames: list[Frame], ticks: int, kept: list[float], thinned: list[float]) -> RunSeries:
    series = RunSeries()
    for i in range(ticks):
        f = frames[i % len(frames)]
        f = Frame(T0 + i, f.gpus, None, f.training)
        before, stride = time.perf_counter(), series._stride
        series.add(f, result(T0 + i))
        (kept if i % stride == 0 else thinned).append(time.perf_counter() - before)
    return series


def main() -> None:
    for ranks, gpus in ((8, 8), (1024, 64)):
        kept, thinned, size = per_tick(ranks, gpus)
        print(
            f"{ranks:>5} ranks, {gpus:>2} GPUs: add {kept:.0f} µs a kept tick, {thinned:.0f} µs a thinned one; "
            f"5,000 ticks kept in {size / 1e6:.1f} MB"
        )
    series = RunSeries()
    for i in range(1200):
        series.add(frame(T0 + i, 1024, 64), result(T0 + i))
    start = time.perf_counter()
    page = render_run(series, "bench")
    print(f"page of 1,200 points, 1,024 ranks: {time.perf_counter() - start:.1f} s, {len(page.encode()) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
