"""A simulated scenario's samples, collected as the daemon collects them, and slices of them by time."""

from __future__ import annotations

from functools import cache

from trainpulse_otel.collect.base import Collected
from trainpulse_otel.collect.sim import (
    SimulatedNode,
)
from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.samples import (
    TrainingSample,
)

START = 1764400000.0


Run = tuple[tuple[float, Collected], ...]


@cache
def run(name: str, seconds: float | None = None, seed: int = 0) -> Run:
    """One scenario sampled once a second for its evaluation duration (cached across tests)."""
    node = SimulatedNode(name, seed=seed, start_ts=START)
    end = SCENARIOS[name].duration_s if seconds is None else seconds
    return tuple((float(t), node.sample(float(t))) for t in range(int(end)))


def training(samples: Run, lo: float = 0.0, hi: float = float("inf")) -> list[TrainingSample]:
    return [c.training for t, c in samples if lo <= t < hi and c.training is not None]


def ticks(samples: Run, lo: float = 0.0, hi: float = float("inf")) -> list[Collected]:
    return [c for t, c in samples if lo <= t < hi]
