"""The model's knobs: what every fault moves, resolved once per tick from the scenario.

Faults never compute samples; they move knobs (see :mod:`.scenarios`), and
the one physical model reads them. :class:`Knobs` is every knob's value for
one tick, healthy unless a scenario's effect is in force.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .job import CHECKPOINT_EVERY_S, CHECKPOINT_SAVE_S
from .physics import POWER_LIMIT_W
from .scenarios import Scenario

#: What each job-wide knob is when no fault moves it (see ``scenarios.JOB_KNOBS``).
JOB_HEALTHY: dict[str, float] = {
    "data_wait_frac": 0.0,
    "tokenizer_frac": 0.0,
    "kernel_density": 1.0,
    "flop_efficiency": 1.0,
    "imbalance_cv": 0.0,
    "allreduce_factor": 1.0,
    "power_cap_w": POWER_LIMIT_W,
    "checkpoint_every_s": CHECKPOINT_EVERY_S,
    "checkpoint_save_s": CHECKPOINT_SAVE_S,
    "host_cpu_percent": 0.0,
    "host_memory_leak": 0.0,
    "loss_factor": 1.0,
    "divergence": 0.0,
    "peer_lost": 0.0,
}

#: The same for per-GPU knobs; ``gpu_memory_frac`` is each GPU's own healthy level.
GPU_HEALTHY: dict[str, float] = {
    "cooling_loss": 1.0,
    "rank_slowdown": 1.0,
    "gpu_memory_leak": 0.0,
    "gpu_lost": 0.0,
    "ecc_corrected_rate": 0.0,
    "row_remap_pending": 0.0,
    "rank_hang": 0.0,
}


@dataclass(frozen=True, slots=True)
class Knobs:
    """Every knob's value for one tick (fields named as the knobs), resolved once per tick."""

    data_wait_frac: float
    tokenizer_frac: float
    kernel_density: float
    flop_efficiency: float
    imbalance_cv: float
    allreduce_factor: float
    power_cap_w: float
    checkpoint_every_s: float
    checkpoint_save_s: float
    host_cpu_percent: float
    host_memory_leak: float
    loss_factor: float
    divergence: float
    peer_lost: float
    cooling_loss: list[float]  # per local GPU
    rank_slowdown: list[float]  # per local GPU (and the rank on it)
    gpu_memory_frac: list[float]
    gpu_memory_leak: list[float]
    memory_frac: list[float]  # derived per GPU: in use / total, leak included
    gpu_lost: list[float]  # per local GPU: >= 0.5 once it fell off the bus
    ecc_corrected_rate: list[float]  # per local GPU, errors per second
    row_remap_pending: list[float]  # per local GPU: >= 0.5 once a remap waits for a reset
    rank_hang: list[float]  # per local GPU (and the rank on it): >= 0.5 while the rank is stuck

    def hung(self) -> tuple[int, ...]:
        """The local GPUs whose ranks are stuck now."""
        return tuple(g for g, level in enumerate(self.rank_hang) if level >= 0.5)

    @classmethod
    def healthy(cls, memory_frac: list[float]) -> Knobs:
        """The knobs of a node with no fault, whose GPUs hold ``memory_frac`` of their memory."""
        per_gpu = {knob: [value] * len(memory_frac) for knob, value in GPU_HEALTHY.items()}
        return cls(**JOB_HEALTHY, **per_gpu, gpu_memory_frac=memory_frac, memory_frac=memory_frac)

    def at(self, scenario: Scenario, t: float) -> Knobs:
        """These (healthy) knobs with the scenario's effects applied at ``t``.

        Each active effect moves its knob from the current value toward its
        level by its progress; effects on one knob apply in catalogue order.
        """
        changes: dict[str, Any] = {}
        for effect in scenario.effects:
            p = effect.progress(t, scenario.onset_s)
            if p <= 0:
                continue
            now = changes.get(effect.knob, getattr(self, effect.knob))
            if isinstance(now, list):
                gpus = effect.gpus
                now = [v + (effect.level - v) * p if gpus is None or i in gpus else v for i, v in enumerate(now)]
            else:
                now += (effect.level - now) * p
            changes[effect.knob] = now
        if not changes:
            return self
        if "gpu_memory_frac" in changes or "gpu_memory_leak" in changes:
            fracs = changes.get("gpu_memory_frac", self.gpu_memory_frac)
            leaks = changes.get("gpu_memory_leak", self.gpu_memory_leak)
            changes["memory_frac"] = [f + (1.0 - f) * leak for f, leak in zip(fracs, leaks, strict=True)]
        return replace(self, **changes)
