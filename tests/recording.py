"""An engine that records a trace to a file under a scripted collector and a controlled clock."""

from __future__ import annotations

from tests import parts
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.config import Settings
from trainpulse_otel.samples import GpuSample, HostSample, RankSample, TrainingSample


class ScriptedCollector:
    """Varying GPU and host samples, one set per tick."""

    name = "scripted"

    def collect(self, now: float) -> Collected:
        k = int(now) % 7
        gpus = tuple(
            GpuSample(
                index=i,
                utilization_percent=90.0 + k + i / 8,
                temperature_celsius=60.0 + k,
                sm_clock_mhz=1980.0 - 10 * k,
                throttle_reasons=("gpu_idle",) if k == 3 else (),
            )
            for i in range(4)
        )
        return Collected(gpus=gpus, host=HostSample(cpu_percent=10.0 + k, memory_available_bytes=10**9 + k))

    def close(self) -> None:
        pass


def training_report(step: int) -> TrainingSample:
    return TrainingSample(
        global_step=step,
        step_time_ms=1000.0 + step,
        model_name="m",
        ranks=tuple(RankSample(rank=r, gpu_index=r, step_time_ms=990.0 + r + step) for r in range(4)),
    )


def recording_engine(path, clock: list[float], **settings):
    """An engine with the scripted collector recording to ``path``, its clock ``clock[0]`` (the test moves it)."""
    return parts.engine(
        Settings(record=str(path), **settings),
        collectors=[ScriptedCollector()],
        mode="scripted",
        clock=lambda: clock[0],
    )
