"""Validation: untrusted JSON-like input into samples, or a :class:`SampleError` naming the field.

Every field has a :class:`Rule` (its kind and closed bounds); the parse
functions check each field against it and name the offending one
(``ranks[3].step_time_ms``), so every front end can answer a precise 4xx.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .model import DEFAULT_MAX_RANKS, RANK_PHASES, THROTTLE_REASONS, GpuSample, HostSample, RankSample, TrainingSample

MAX_STRING_LENGTH = 256


class SampleError(ValueError):
    """Input that does not fit the sample model; ``field`` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


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
}
#: XID codes are positive (NVML reports 999 for one it cannot name); a sample lists at most this many.
XID_CODE = Rule("int", 1, 65_535)
MAX_XIDS_PER_SAMPLE = 1024

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
# A rank's ``phase`` and ``pid`` are parsed by :func:`parse_rank` beside these rules: a phase is one of
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


_SLOW = object()


def check_value(field: str, value: Any, rule: Rule) -> Any:
    """Return ``value`` coerced to the rule's kind, or raise SampleError naming ``field``."""
    checked = _fast_check(value, rule)
    return checked if checked is not _SLOW else _checked_slowly(field, value, rule)


def _fast_check(value: Any, rule: Rule) -> Any:
    """The value when it is well formed for ``rule`` (the common case, kept cheap); else ``_SLOW``."""
    kind = type(value)
    if rule.kind == "float":
        if kind is float or kind is int:
            number = float(value)
            if (
                math.isfinite(number)
                and (rule.lo is None or number >= rule.lo)
                and (rule.hi is None or number <= rule.hi)
            ):
                return number
    elif rule.kind == "int":
        if kind is int and (rule.lo is None or value >= rule.lo) and (rule.hi is None or value <= rule.hi):
            return value
    elif kind is str and len(value) <= MAX_STRING_LENGTH:
        return value
    return _SLOW


def _checked_slowly(field: str, value: Any, rule: Rule) -> Any:
    if rule.kind == "str":
        if not isinstance(value, str):
            raise SampleError(field, f"must be a string, got {type_name(value)}")
        if len(value) > MAX_STRING_LENGTH:
            raise SampleError(field, f"must be at most {MAX_STRING_LENGTH} characters")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SampleError(field, f"must be a number, got {type_name(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        if rule.nonfinite_ok:
            return float(value)
        raise SampleError(field, f"must be finite, got {value!r}")
    if rule.kind == "int":
        if isinstance(value, float):
            if not value.is_integer():
                raise SampleError(field, f"must be an integer, got {value!r}")
            value = int(value)
    else:
        value = float(value)
    if rule.lo is not None and value < rule.lo:
        raise SampleError(field, f"must be >= {_bound(rule.lo)}, got {value!r}")
    if rule.hi is not None and value > rule.hi:
        raise SampleError(field, f"must be <= {_bound(rule.hi)}, got {value!r}")
    return value


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _checked_fields(data: Any, rules: Mapping[str, Rule], prefix: str) -> dict[str, Any]:
    """Validate the known fields of ``data``; unknown keys and nulls are ignored."""
    if not isinstance(data, dict) and not isinstance(data, Mapping):
        raise SampleError(prefix.rstrip("."), f"must be an object, got {type_name(data)}")
    out: dict[str, Any] = {}
    for name, value in data.items():
        rule = rules.get(name)
        if rule is None or value is None:
            continue
        if type(value) is rule.exact_type and rule.floor <= value <= rule.ceiling:
            out[name] = value  # the common case: a well-formed number, accepted without a call
            continue
        checked = _fast_check(value, rule)  # the field's full name is only built for an error
        out[name] = checked if checked is not _SLOW else _checked_slowly(prefix + name, value, rule)
    return out


# ----------------------------------------------------------------- parsers


def parse_gpu(data: Any, where: str = "gpus[0]") -> GpuSample:
    """Build a GpuSample from a JSON object; ``index`` is required."""
    values = _checked_fields(data, GPU_RULES, where + ".")
    if "index" not in values:
        raise SampleError(where + ".index", "is required")
    reasons = data.get("throttle_reasons")
    if reasons is not None:
        values["throttle_reasons"] = _parse_reasons(reasons, where + ".throttle_reasons")
    xids = data.get("xid_errors")
    if xids is not None:
        values["xid_errors"] = _parse_xids(xids, where + ".xid_errors")
    return GpuSample(**values)


def _parse_xids(xids: Any, field: str) -> tuple[int, ...]:
    """The XID codes of one sample: positive integers, in the order they were seen."""
    if not isinstance(xids, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(xids)}")
    if len(xids) > MAX_XIDS_PER_SAMPLE:
        raise SampleError(field, f"has {len(xids)} entries; at most {MAX_XIDS_PER_SAMPLE} are accepted")
    return tuple(check_value(f"{field}[{i}]", code, XID_CODE) for i, code in enumerate(xids))


def _parse_reasons(reasons: Any, field: str) -> tuple[str, ...]:
    if not isinstance(reasons, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(reasons)}")
    seen = set()
    for i, reason in enumerate(reasons):
        if reason not in THROTTLE_REASONS:
            raise SampleError(f"{field}[{i}]", f"unknown reason {reason!r}; known: {', '.join(THROTTLE_REASONS)}")
        seen.add(reason)
    return tuple(r for r in THROTTLE_REASONS if r in seen)


def parse_gpus(data: Any, field: str = "gpus") -> tuple[GpuSample, ...]:
    """Build the GPU list of a trace line; indices must be unique."""
    if not isinstance(data, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(data)}")
    gpus = tuple(parse_gpu(item, f"{field}[{i}]") for i, item in enumerate(data))
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise SampleError(field, "GPU indices must be unique")
    return tuple(sorted(gpus, key=lambda g: g.index))


def parse_host(data: Any, field: str = "host") -> HostSample:
    """Build a HostSample from a JSON object."""
    return HostSample(**_checked_fields(data, HOST_RULES, field + "."))


def parse_rank(data: Any, where: str) -> RankSample:
    """Build a RankSample; ``rank`` is required, ``phase`` one of RANK_PHASES."""
    values = _checked_fields(data, RANK_RULES, where + ".")
    if "rank" not in values:
        raise SampleError(where + ".rank", "is required")
    phase = data.get("phase")
    if phase is not None:
        if phase not in RANK_PHASES:
            shown = repr(phase) if isinstance(phase, str) else f"a {type_name(phase)}"
            raise SampleError(where + ".phase", f"unknown phase {shown}; known: {', '.join(RANK_PHASES)}")
        values["phase"] = phase
    pid = data.get("pid")
    if pid is not None:
        values["pid"] = check_value(where + ".pid", pid, COUNT)
    return RankSample(**values)


def parse_training(data: Any, max_ranks: int = DEFAULT_MAX_RANKS) -> TrainingSample:
    """Build a TrainingSample from the contract's training payload.

    Raises SampleError naming the field for a non-object body, a wrong type, a
    non-finite or out-of-range value, a bad or duplicate rank entry, more than
    ``max_ranks`` ranks, ``avg_seq_len > max_seq_len``, or no measurement at all.
    """
    if not isinstance(data, Mapping):
        raise SampleError("", f"body must be a JSON object, got {type_name(data)}")
    values = _checked_fields(data, TRAINING_RULES, "")
    ranks = data.get("ranks")
    if ranks is not None:
        values["ranks"] = _parse_ranks(ranks, max_ranks)
    avg, longest = values.get("avg_seq_len"), values.get("max_seq_len")
    if avg is not None and longest is not None and avg > longest:
        raise SampleError("avg_seq_len", f"must be <= max_seq_len ({longest!r}), got {avg!r}")
    if not values.get("ranks") and not any(k in values for k in TRAINING_MEASUREMENT_FIELDS):
        raise SampleError("", "payload has no measurement (e.g. step_time_ms, tokens_per_sec or ranks)")
    return TrainingSample(**values)


def _parse_ranks(ranks: Any, max_ranks: int) -> tuple[RankSample, ...]:
    if not isinstance(ranks, (list, tuple)):
        raise SampleError("ranks", f"must be an array, got {type_name(ranks)}")
    if len(ranks) > max_ranks:
        raise SampleError("ranks", f"has {len(ranks)} entries; at most {max_ranks} are accepted")
    parsed = tuple(parse_rank(item, f"ranks[{i}]") for i, item in enumerate(ranks))
    seen: set[int] = set()
    for i, r in enumerate(parsed):
        if r.rank in seen:
            raise SampleError(f"ranks[{i}].rank", f"duplicate rank {r.rank}")
        seen.add(r.rank)
    return tuple(sorted(parsed, key=lambda r: r.rank))
