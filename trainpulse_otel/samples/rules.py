"""The rules every sample field is checked against: its kind and closed bounds, by sample kind.

Validation (:mod:`.validation`) applies them; its fast path (:mod:`.builder`)
reads their precomputed ``exact_type``/``floor``/``ceiling``; the OTLP receiver
reuses the field rules for the points it decodes.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

from .ports import PORT_COUNTERS

MAX_STRING_LENGTH = 256


@dataclass(frozen=True, slots=True)
class Rule:
    """How one field is checked: its kind and closed bounds.

    ``exact_type``, ``floor`` and ``ceiling`` serve the validators' fast path:
    a value of exactly that type inside ``[floor, ceiling]`` is accepted as it
    is. The float span is the finite floats at most, so NaN and ±inf — which
    compare false or fall outside — always take the slow path and its error.
    """

    kind: str  # "str" | "int" | "float"
    lo: float | None = None
    hi: float | None = None
    #: NaN and ±inf are data for this field (a diverged loss), not bad input; finite values keep the bounds.
    nonfinite_ok: bool = False
    exact_type: type | None = dataclasses.field(init=False, repr=False, compare=False)
    floor: float = dataclasses.field(init=False, repr=False, compare=False)
    ceiling: float = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exact = {"float": float, "int": int}.get(self.kind)
        floor = -sys.float_info.max if self.lo is None else self.lo
        ceiling = sys.float_info.max if self.hi is None else self.hi
        if exact is int and (self.lo is None or self.hi is None):
            exact = None  # unbounded ints are rare; the slow path checks them
        object.__setattr__(self, "exact_type", exact)
        object.__setattr__(self, "floor", floor)
        object.__setattr__(self, "ceiling", ceiling)


STR = Rule("str")
#: Largest integer accepted: exact in a float64 and in every JSON parser, and inside OTLP's int64.
MAX_SAFE_INT = 2**53 - 1
COUNT = Rule("int", 0, MAX_SAFE_INT)  # steps, ranks, indices, byte counts
SIZE = Rule("int", 1, MAX_SAFE_INT)  # world size, batch sizes, parallel degrees
NONNEG = Rule("float", 0)  # times and rates
FRACTION = Rule("float", 0, 1)
PERCENT = Rule("float", 0, 100)
FINITE = Rule("float")
#: A loss: any float, NaN and ±inf included (the JSON tokens Python's json writes when training diverges).
LOSS = Rule("float", nonfinite_ok=True)
#: A gradient norm: >= 0 when finite; NaN and ±inf accepted as for the loss.
GRAD_NORM = Rule("float", 0, nonfinite_ok=True)

GPU_RULES: dict[str, Rule] = {
    "index": COUNT,
    "uuid": STR,
    "name": STR,
    "utilization_percent": PERCENT,
    "memory_utilization_percent": PERCENT,
    "memory_used_bytes": COUNT,
    "memory_total_bytes": COUNT,
    "temperature_celsius": Rule("float", -273.15, 1000),
    "power_watts": NONNEG,
    "power_limit_watts": NONNEG,
    "sm_clock_mhz": NONNEG,
    "max_sm_clock_mhz": NONNEG,
    "ecc_uncorrected_errors": COUNT,
    "ecc_corrected_errors": COUNT,
    "remapped_rows_pending": COUNT,
    "remapped_rows_failed": COUNT,
    "pcie_replay_errors": COUNT,
    "pcie_link_gen": Rule("int", 1, 16),
    "pcie_link_gen_max": Rule("int", 1, 16),
    "pcie_link_width": Rule("int", 1, 64),
    "pcie_link_width_max": Rule("int", 1, 64),
    "nvlink_crc_errors": COUNT,
    "nvlink_replay_errors": COUNT,
    "nvlink_recovery_errors": COUNT,
    "nvlink_links_down": COUNT,
}
#: XID codes are positive (NVML reports 999 for one it cannot name); a sample lists at most this many.
XID_CODE = Rule("int", 1, 65_535)
MAX_XIDS_PER_SAMPLE = 1024

#: An InfiniBand/RoCE port's numbers: its counters (cumulative) and the rate it trained at (Gb/s).
PORT_RULES: dict[str, Rule] = {**dict.fromkeys(PORT_COUNTERS, COUNT), "rate_gbps": NONNEG}

HOST_RULES: dict[str, Rule] = {
    "cpu_percent": PERCENT,
    "cpu_count": SIZE,
    "load1": NONNEG,
    "load5": NONNEG,
    "load15": NONNEG,
    "memory_total_bytes": COUNT,
    "memory_available_bytes": COUNT,
    "swap_total_bytes": COUNT,
    "swap_used_bytes": COUNT,
    "disk_read_bytes_per_sec": NONNEG,
    "disk_write_bytes_per_sec": NONNEG,
    "net_rx_bytes_per_sec": NONNEG,
    "net_tx_bytes_per_sec": NONNEG,
}

RANK_RULES: dict[str, Rule] = {
    "rank": COUNT,
    "gpu_index": COUNT,
    "hostname": STR,
    "step_time_ms": NONNEG,
    "tokens_per_sec": NONNEG,
    "data_wait_ms": NONNEG,
    "sync_wait_ms": NONNEG,
    "all_reduce_wait_ms": NONNEG,
    "loss": LOSS,
    "grad_norm": GRAD_NORM,
    "global_step": COUNT,
    "phase_since": NONNEG,
}
# A rank's ``phase`` and ``pid`` are parsed by :func:`.validation.parse_rank` beside these rules: a phase is one of
# RANK_PHASES, not any string, and the pid travels with the phase (one point, see telemetry/catalog.py).

TRAINING_RULES: dict[str, Rule] = {
    "timestamp": NONNEG,
    "workload_kind": STR,
    "model_family": STR,
    "model_name": STR,
    "framework": STR,
    "precision": STR,
    "hostname": STR,
    "global_step": COUNT,
    "step_time_ms": NONNEG,
    "tokens_per_sec": NONNEG,
    "samples_per_sec": NONNEG,
    "mfu": FRACTION,
    "tflops": NONNEG,
    "avg_seq_len": NONNEG,
    "max_seq_len": NONNEG,
    "data_wait_ms": NONNEG,
    "tokenizer_wait_ms": NONNEG,
    "sync_wait_ms": NONNEG,
    "all_reduce_wait_ms": NONNEG,
    "checkpoint_ms": NONNEG,
    "checkpoint_load_ms": NONNEG,
    "pipeline_bubble_ratio": FRACTION,
    "loss": LOSS,
    "grad_norm": GRAD_NORM,
    "learning_rate": NONNEG,
    "world_size": SIZE,
    "global_batch_size": SIZE,
    "micro_batch_size": SIZE,
    "gradient_accumulation_steps": SIZE,
    "tensor_parallel_size": SIZE,
    "pipeline_parallel_size": SIZE,
    "data_parallel_size": SIZE,
    "loss_max": LOSS,
    "skipped_steps": COUNT,
    "loss_scale": NONNEG,
}

#: Fields that describe a job rather than measure it; a payload of only these is empty.
TRAINING_IDENTITY_FIELDS = frozenset(name for name, rule in TRAINING_RULES.items() if rule.kind == "str") | {
    "timestamp",
    "global_step",
    "world_size",
    "global_batch_size",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
}

TRAINING_MEASUREMENT_FIELDS: tuple[str, ...] = tuple(
    name for name in TRAINING_RULES if name not in TRAINING_IDENTITY_FIELDS
)
