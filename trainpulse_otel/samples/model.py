"""The sample model: GPU, host, rank and training samples, and the frame of one tick.

Immutable value objects; :mod:`.validation` turns untrusted input into them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

THROTTLE_REASONS: tuple[str, ...] = (
    "gpu_idle",
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
)

DEFAULT_MAX_RANKS = 8192

#: What a rank can be doing now (its heartbeat's ``phase``): the contract's names.
RANK_PHASES: tuple[str, ...] = (
    "data",
    "tokenizer",
    "compute",
    "all_reduce",
    "sync",
    "checkpoint",
    "optimizer",
    "eval",
    "idle",
)
#: Phases in which a rank waits inside a collective for its peers.
COLLECTIVE_PHASES = frozenset(("all_reduce", "sync"))


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant, as NVML (or nvidia-smi, or the simulator) saw it."""

    index: int
    uuid: str | None = None
    name: str | None = None
    utilization_percent: float | None = None
    memory_utilization_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    ecc_uncorrected_errors: int | None = None


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host at one instant: CPU, load, memory, swap, disk and network rates."""

    cpu_percent: float | None = None
    cpu_count: int | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    disk_read_bytes_per_sec: float | None = None
    disk_write_bytes_per_sec: float | None = None
    net_rx_bytes_per_sec: float | None = None
    net_tx_bytes_per_sec: float | None = None


@dataclass(frozen=True, slots=True)
class RankSample:
    """One rank's view of the latest step; ``gpu_index`` ties it to a GPU.

    ``global_step``, ``phase`` and ``phase_since`` are the rank's heartbeat:
    its last completed step and what it is doing now (one of
    :data:`RANK_PHASES`, since that unix time), sent even while its step is
    blocked; ``pid`` is its process, for a stack dump when it hangs.
    """

    rank: int
    gpu_index: int | None = None
    hostname: str | None = None
    step_time_ms: float | None = None
    tokens_per_sec: float | None = None
    data_wait_ms: float | None = None
    sync_wait_ms: float | None = None
    all_reduce_wait_ms: float | None = None
    global_step: int | None = None
    phase: str | None = None
    phase_since: float | None = None
    pid: int | None = None


#: The parts of a rank's entry that arrive separately: its identity, its heartbeat (every few seconds, also
#: while its step is blocked) and its step measurements (the rank gather, every few steps).
RANK_IDENTITY = ("gpu_index", "hostname")
RANK_HEARTBEAT = ("global_step", "phase", "phase_since", "pid")
RANK_MEASUREMENTS = tuple(f.name for f in fields(RankSample) if f.name not in ("rank", *RANK_IDENTITY, *RANK_HEARTBEAT))


def merged_rank(old: RankSample, new: RankSample) -> RankSample:
    """``new`` with each part it does not carry (measurements, heartbeat, identity) taken from ``old``."""
    kept = {}
    for part in (RANK_MEASUREMENTS, RANK_HEARTBEAT, RANK_IDENTITY):
        if all(getattr(new, name) is None for name in part):
            kept.update({name: getattr(old, name) for name in part})
    return replace(new, **kept) if kept else new


@dataclass(frozen=True, slots=True)
class TrainingSample:
    """One training-loop report: the contract's training payload."""

    timestamp: float | None = None
    workload_kind: str | None = None
    model_family: str | None = None
    model_name: str | None = None
    framework: str | None = None
    precision: str | None = None
    hostname: str | None = None
    global_step: int | None = None
    step_time_ms: float | None = None
    tokens_per_sec: float | None = None
    samples_per_sec: float | None = None
    mfu: float | None = None
    tflops: float | None = None
    avg_seq_len: float | None = None
    max_seq_len: float | None = None
    data_wait_ms: float | None = None
    tokenizer_wait_ms: float | None = None
    sync_wait_ms: float | None = None
    all_reduce_wait_ms: float | None = None
    checkpoint_ms: float | None = None
    pipeline_bubble_ratio: float | None = None
    loss: float | None = None
    grad_norm: float | None = None
    learning_rate: float | None = None
    world_size: int | None = None
    global_batch_size: int | None = None
    micro_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    ranks: tuple[RankSample, ...] = ()


@dataclass(frozen=True, slots=True)
class Frame:
    """The whole world at one tick: what the diagnostic window holds.

    Produced by the in-process metric reader from collected OTel metrics, or by
    replay from recorded samples through the same conversion.
    """

    ts: float
    gpus: tuple[GpuSample, ...] = ()
    host: HostSample | None = None
    training: TrainingSample | None = None


# --------------------------------------------------------------- to JSON


def to_dict(sample: Any) -> dict[str, Any]:
    """A sample as a JSON-ready dict, leaving out unknown (None) fields."""
    out: dict[str, Any] = {}
    for f in fields(sample):
        value = getattr(sample, f.name)
        if value is None:
            continue
        if f.name == "ranks":
            value = [to_dict(r) for r in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
