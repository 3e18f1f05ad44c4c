"""Hand-built frames of a healthy 8-GPU job, and a harness that runs detectors the way the pipeline does.

``job(t, **changes)`` is one frame of a steady llama-like job at ``t`` seconds:
8 busy H100s, a quiet host and a training report, with small seeded noise.
Keyword changes replace fields of the GPUs (``gpu={...}`` for all, or
``gpus={5: {...}}`` for one), the host (``host={...}``), the training report
(``training={...}``) or every rank (``rank={...}``, ``ranks={5: {...}}``).
:class:`Harness` feeds frames to one detector through the real tick builder
and signal state machine and records what was raised and cleared, and when.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from trainpulse_otel.diagnose.tick import TickBuilder
from trainpulse_otel.diagnose.tracker import SignalTracker
from trainpulse_otel.diagnose.types import Finding, Transition
from trainpulse_otel.samples import Frame, GpuSample, HostSample, RankSample, TrainingSample

T0 = 1_764_400_000.0
GIB = 1024**3
GPU_TOTAL = 80 * GIB


def gpu(index: int, rng: random.Random, **changes: Any) -> GpuSample:
    base = GpuSample(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        utilization_percent=float(rng.choice((96, 97, 98))),
        memory_used_bytes=int(0.78 * GPU_TOTAL),
        memory_total_bytes=GPU_TOTAL,
        temperature_celsius=float(66 + index % 3 + rng.choice((0, 0, 1))),
        power_watts=640.0 + rng.gauss(0, 5),
        power_limit_watts=700.0,
        sm_clock_mhz=1980.0,
        max_sm_clock_mhz=1980.0,
        throttle_reasons=(),
    )
    return replace(base, **changes)


def host(rng: random.Random, **changes: Any) -> HostSample:
    base = HostSample(
        cpu_percent=26.0 + rng.gauss(0, 1),
        cpu_count=192,
        memory_total_bytes=2048 * GIB,
        memory_available_bytes=int((1400 + rng.gauss(0, 0.3)) * GIB),
        swap_total_bytes=8 * GIB,
        swap_used_bytes=300 * 1024**2,
        disk_write_bytes_per_sec=12e6 * rng.uniform(0.7, 1.3),
    )
    return replace(base, **changes)


def ranks(
    n: int, rng: random.Random, step_ms: float, every: Mapping[str, Any], some: Mapping[int, Mapping[str, Any]]
) -> tuple[RankSample, ...]:
    """Own-busy convention: step = compute + all-reduce; sync = wait for the last arrival."""
    out = []
    for r in range(n):
        fields = {
            "step_time_ms": step_ms * rng.uniform(0.99, 1.01),
            "data_wait_ms": 4.0,
            "all_reduce_wait_ms": 105.0,
            **every,
            **some.get(r, {}),
        }
        out.append(
            RankSample(rank=r, gpu_index=r % 8, hostname="node-000" if r < 8 else f"node-{r // 8:03d}", **fields)
        )
    arrivals = [x.data_wait_ms + x.step_time_ms - x.all_reduce_wait_ms for x in out]
    last = max(arrivals)
    return tuple(replace(x, sync_wait_ms=round(last - a + 1.5, 3)) for x, a in zip(out, arrivals, strict=True))


def job(
    t: float,
    seed: int = 0,
    n_ranks: int = 8,
    gpu_changes: Mapping[str, Any] | None = None,
    gpus: Mapping[int, Mapping[str, Any]] | None = None,
    host_changes: Mapping[str, Any] | None = None,
    training: Mapping[str, Any] | None = None,
    rank: Mapping[str, Any] | None = None,
    rank_changes: Mapping[int, Mapping[str, Any]] | None = None,
    with_training: bool = True,
    with_gpus: bool = True,
) -> Frame:
    rng = random.Random(hash((seed, t)))
    gpu_samples = (
        tuple(gpu(i, rng, **{**(gpu_changes or {}), **(gpus or {}).get(i, {})}) for i in range(8)) if with_gpus else ()
    )
    report = None
    if with_training:
        rs = ranks(n_ranks, rng, 1700.0, rank or {}, rank_changes or {})
        step = max(x.data_wait_ms + x.step_time_ms + x.sync_wait_ms for x in rs) + 12.0
        base = TrainingSample(
            timestamp=T0 + t,
            global_step=24000 + int(t),
            model_name="llama-3-8b",
            framework="pytorch",
            hostname="node-000",
            step_time_ms=step,
            tokens_per_sec=131072 / (step / 1000),
            mfu=0.45 * 1780 / step,
            avg_seq_len=4090.0,
            max_seq_len=4096.0,
            data_wait_ms=4.0,
            tokenizer_wait_ms=1.5,
            sync_wait_ms=sum(x.sync_wait_ms for x in rs) / len(rs),
            all_reduce_wait_ms=105.0,
            checkpoint_ms=0.0,
            pipeline_bubble_ratio=0.0,
            world_size=n_ranks,
            ranks=rs,
        )
        report = replace(base, **(training or {}))
    return Frame(ts=T0 + t, gpus=gpu_samples, host=host(rng, **(host_changes or {})), training=report)


@dataclass
class Harness:
    """One detector behind the real tick builder and state machine."""

    detector: Any
    ticks: TickBuilder = field(default_factory=TickBuilder)
    tracker: SignalTracker = field(default_factory=SignalTracker)
    timeline: list[Transition] = field(default_factory=list)
    findings: list[tuple[float, list[Finding]]] = field(default_factory=list)
    _due: float = float("-inf")

    def feed(self, frames: Iterable[Frame]) -> Harness:
        for frame in frames:
            tick = self.ticks.next(frame)
            if tick.ts >= self._due:
                self._due = tick.ts + getattr(self.detector, "every_s", 0.0)
                found = self.detector.update(tick)
                if found is not None:
                    self.findings.append((tick.ts - T0, found))
                    self.tracker.observe(0, found, self.detector.policy, tick.ts)
            self.tracker.expire(tick.ts)
            self.timeline.extend(self.tracker.drain())
        return self

    def run(self, seconds: range | Iterable[float], frame: Callable[[float], Frame]) -> Harness:
        return self.feed(frame(float(t)) for t in seconds)

    def raised(self, signal: str | None = None) -> list[Transition]:
        return [t for t in self.timeline if t.event == "raised" and signal in (None, t.signal)]

    def cleared(self, signal: str | None = None) -> list[Transition]:
        return [t for t in self.timeline if t.event == "cleared" and signal in (None, t.signal)]

    def first_raise_s(self, signal: str | None = None) -> float | None:
        got = self.raised(signal)
        return got[0].ts - T0 if got else None

    def active(self) -> list:
        return list(self.tracker.signals())
