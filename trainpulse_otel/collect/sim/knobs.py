"""The model's knobs: what every fault moves, resolved once per tick from the scenario.

Faults never compute samples; they move knobs (:data:`JOB_KNOBS`, :data:`GPU_KNOBS`), one :class:`Effect` each
(see :mod:`.scenarios`), and the one physical model reads them. :class:`Knobs` is every knob's value for
one tick, healthy unless a scenario's effect is in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .job import CHECKPOINT_EVERY_S, CHECKPOINT_SAVE_S
from .physics import POWER_LIMIT_W

if TYPE_CHECKING:
    from .scenarios import Scenario

#: Knobs that apply to the whole job (an Effect on them must not name GPUs).
JOB_KNOBS: Mapping[str, str] = {
    "data_wait_frac": "share of the step spent waiting for the data loader",
    "tokenizer_frac": "share of the step spent in on-the-fly tokenization",
    "kernel_density": "share of compute time the GPU actually runs kernels (launch-bound < 1)",
    "flop_efficiency": "achieved FLOP rate relative to a well-tuned bf16 step (unfused/fp32 < 1)",
    "imbalance_cv": "per-rank, per-step spread of work (coefficient of variation)",
    "allreduce_factor": "multiplier on the gradient all-reduce time (degraded interconnect)",
    "power_cap_w": "software power limit on every GPU, watts",
    "checkpoint_every_s": "seconds of training between checkpoint saves",
    "checkpoint_save_s": "typical length of one blocking checkpoint save, seconds",
    "host_cpu_percent": "extra host CPU busy percentage points (input workers, launch threads)",
    "host_memory_leak": "share of the host's available memory leaked; 1 = exhausted (OOM kill)",
    "loss_factor": "multiplier on the training loss (a bad batch, or the start of a divergence)",
    "divergence": "a diverging model: the loss grows to 3x as it goes 0 -> 1, and at 1 it and the gradient norm are NaN",
    "peer_lost": "1 while another node of the job (JobConfig.lost_peer) sends nothing: its ranks are gone, no step completes",
}

#: Knobs set per GPU (and per the rank on that GPU); ``gpus=None`` means every local GPU.
GPU_KNOBS: Mapping[str, str] = {
    "cooling_loss": "multiplier on the GPU's thermal resistance (failing fan or cold plate)",
    "rank_slowdown": "multiplier on the rank's busy time with the GPU starved, not throttled",
    "gpu_memory_frac": "GPU memory in use as a fraction of total",
    "gpu_memory_leak": "share of the GPU's free memory leaked; 1 = exhausted (CUDA OOM)",
    "gpu_lost": "1 once the GPU has fallen off the bus (XID 79): gone from NVML's list, its rank stops",
    "ecc_corrected_rate": "corrected (single-bit) ECC errors per second in the GPU's memory",
    "row_remap_pending": "1 once a row remap is recorded (XID 63) and waits for a GPU reset",
    "rank_hang": "1 while the rank on the GPU is stuck before its all-reduce (its peers wait inside it)",
    "link_error": "1 once the GPU's InfiniBand NIC (its rail to the other nodes) has failed: its rank's transfers fail",
    "rank_exit": "1 once the rank on the GPU has died of an exception (its process exited with an error)",
    "pcie_width": "the PCIe lanes the GPU's link trained at (16; 8 is a link downtrained to x8)",
    "pcie_replay_rate": "PCIe replays per second on the GPU's link (a link going bad retransmits)",
    "nvlink_crc_rate": "NVLink CRC errors per second over the GPU's links",
}

#: Knobs whose level reaching 1 kills the job; ``ramp_s`` is then the time to exhaustion.
LEAK_KNOBS = frozenset({"host_memory_leak", "gpu_memory_leak"})


@dataclass(frozen=True, slots=True)
class Effect:
    """One knob moving from the model's healthy value to ``level``.

    The move starts at ``onset_s`` (the scenario's onset when None) and is
    linear over ``ramp_s`` seconds — a step when ``ramp_s`` is 0. ``gpus``
    restricts a per-GPU knob to those local GPU indices (rank i runs on GPU i).
    """

    knob: str
    level: float
    gpus: tuple[int, ...] | None = None
    onset_s: float | None = None
    ramp_s: float = 0.0

    def __post_init__(self) -> None:
        if self.knob not in JOB_KNOBS and self.knob not in GPU_KNOBS:
            known = ", ".join([*JOB_KNOBS, *GPU_KNOBS])
            raise ValueError(f"unknown knob {self.knob!r}; known: {known}")
        if self.gpus is not None and self.knob in JOB_KNOBS:
            raise ValueError(f"knob {self.knob!r} applies to the whole job; it takes no gpus")
        if self.ramp_s < 0:
            raise ValueError(f"ramp_s must be >= 0, got {self.ramp_s!r}")

    def start(self, scenario_onset_s: float) -> float:
        """When this effect begins, given the scenario's onset."""
        return scenario_onset_s if self.onset_s is None else self.onset_s

    def progress(self, t: float, scenario_onset_s: float) -> float:
        """How far (0..1) the knob has moved toward ``level`` at ``t`` seconds."""
        elapsed = t - self.start(scenario_onset_s)
        if elapsed < 0:
            return 0.0
        if self.ramp_s <= 0:
            return 1.0
        return min(1.0, elapsed / self.ramp_s)


#: What each job-wide knob is when no fault moves it (see :data:`JOB_KNOBS`).
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
    "link_error": 0.0,
    "rank_exit": 0.0,
    "pcie_width": 16.0,
    "pcie_replay_rate": 0.0,
    "nvlink_crc_rate": 0.0,
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
    link_error: list[float]  # per local GPU: >= 0.5 once its InfiniBand NIC has failed
    rank_exit: list[float]  # per local GPU (and the rank on it): >= 0.5 once the rank has died of an exception
    pcie_width: list[float]  # per local GPU: the lanes its PCIe link trained at
    pcie_replay_rate: list[float]  # per local GPU, replays per second
    nvlink_crc_rate: list[float]  # per local GPU, CRC errors per second

    def hung(self) -> tuple[int, ...]:
        """The local GPUs whose ranks are stuck now."""
        return tuple(g for g, level in enumerate(self.rank_hang) if level >= 0.5)

    def links_down(self) -> tuple[int, ...]:
        """The local GPUs whose NICs have failed."""
        return tuple(g for g, level in enumerate(self.link_error) if level >= 0.5)

    def exited(self) -> tuple[int, ...]:
        """The local GPUs whose ranks have died of an exception."""
        return tuple(g for g, level in enumerate(self.rank_exit) if level >= 0.5)

    def job_wide(self, healthy: Knobs) -> Knobs:
        """These knobs with every per-GPU knob as on ``healthy``: what a node whose GPUs are not faulted runs."""
        return replace(self, **{name: getattr(healthy, name) for name in (*GPU_KNOBS, "memory_frac")})

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
