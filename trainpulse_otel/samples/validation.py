"""Validation: untrusted JSON-like input into samples, or a :class:`SampleError` naming the field.

Every field has a :class:`Rule` (its kind and closed bounds); the parse
functions check each field against it and name the offending one
(``ranks[3].step_time_ms``), so every front end can answer a precise 4xx.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from .builder import SampleBuilder
from .model import DEFAULT_MAX_RANKS, RANK_PHASES, THROTTLE_REASONS, GpuSample, HostSample, RankSample, TrainingSample
from .ports import PORT_COUNTERS, PortSample, port_order
from .rules import (
    COUNT,
    GPU_RULES,
    HOST_RULES,
    MAX_STRING_LENGTH,
    MAX_XIDS_PER_SAMPLE,
    PORT_RULES,
    RANK_RULES,
    TRAINING_MEASUREMENT_FIELDS,
    TRAINING_RULES,
    XID_CODE,
    Rule,
)
from .rules import STR as STR  # the OTLP receiver checks its strings with validation's rules
from .stacks import MAX_STACK_FRAMES, StackFrame


class SampleError(ValueError):
    """Input that does not fit the sample model; ``field`` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


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


def parse_gpu(data: Any, where: str = "gpus[0]", node: str | None = None) -> GpuSample:
    """Build a GpuSample from a JSON object; ``index`` is required. ``node``: the other node it is of (a job
    view's), set as it is built: tagging it after would copy every GPU of every node."""
    gpu = _GPU.build(data) if type(data) is dict else None
    if gpu is not None and gpu.index is not None:
        reasons, xids = data.get("throttle_reasons"), data.get("xid_errors")
        if reasons is not None:
            _GPU.put(gpu, "throttle_reasons", _parse_reasons(reasons, where + ".throttle_reasons"))
        if xids is not None:
            _GPU.put(gpu, "xid_errors", _parse_xids(xids, where + ".xid_errors"))
        if node is not None:
            _GPU.put(gpu, "node", node)
        return gpu
    values = _checked_fields(data, GPU_RULES, where + ".")
    if "index" not in values:
        raise SampleError(where + ".index", "is required")
    reasons = data.get("throttle_reasons")
    if reasons is not None:
        values["throttle_reasons"] = _parse_reasons(reasons, where + ".throttle_reasons")
    xids = data.get("xid_errors")
    if xids is not None:
        values["xid_errors"] = _parse_xids(xids, where + ".xid_errors")
    return GpuSample(**values, node=node)


def _parse_xids(xids: Any, field: str) -> tuple[int, ...]:
    """The XID codes of one sample: positive integers, in the order they were seen."""
    if not isinstance(xids, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(xids)}")
    if not xids:
        return ()
    if len(xids) > MAX_XIDS_PER_SAMPLE:
        raise SampleError(field, f"has {len(xids)} entries; at most {MAX_XIDS_PER_SAMPLE} are accepted")
    return tuple(check_value(f"{field}[{i}]", code, XID_CODE) for i, code in enumerate(xids))


def _parse_reasons(reasons: Any, field: str) -> tuple[str, ...]:
    if not isinstance(reasons, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(reasons)}")
    if not reasons:
        return ()
    seen = set()
    for i, reason in enumerate(reasons):
        if reason not in THROTTLE_REASONS:
            raise SampleError(f"{field}[{i}]", f"unknown reason {reason!r}; known: {', '.join(THROTTLE_REASONS)}")
        seen.add(reason)
    return tuple(r for r in THROTTLE_REASONS if r in seen)


def parse_gpus(data: Any, field: str = "gpus", node: str | None = None) -> tuple[GpuSample, ...]:
    """Build the GPU list of a trace line (of ``node``: see :func:`parse_gpu`); indices must be unique."""
    if not isinstance(data, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(data)}")
    gpus = tuple(parse_gpu(item, f"{field}[{i}]", node) for i, item in enumerate(data))
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise SampleError(field, "GPU indices must be unique")
    return tuple(sorted(gpus, key=lambda g: g.index))


#: A port's identity and words: the device's name, the port's number (1-based), its states and link layer.
PORT_NAME, PORT_NUMBER = Rule("str", 1, 64), Rule("int", 1, 255)
PORT_WORDS = ("state", "phys_state", "link_layer")


def parse_ports(data: Any, field: str = "ports") -> tuple[PortSample, ...]:
    """The InfiniBand/RoCE ports of a trace line: each ``{"device", "port", "state", "phys_state", "rate_gbps",
    "link_layer", "counters": {name: count}}`` (counters of :data:`PORT_COUNTERS` only); device and port unique."""
    if not isinstance(data, (list, tuple)):
        raise SampleError(field, f"must be an array, got {type_name(data)}")
    ports = tuple(_parse_port(item, f"{field}[{i}]") for i, item in enumerate(data))
    keys = [p.key for p in ports]
    if len(set(keys)) != len(keys):
        raise SampleError(field, "each device and port must be listed once")
    return tuple(sorted(ports, key=port_order))


def _parse_port(data: Any, where: str) -> PortSample:
    if not isinstance(data, Mapping):
        raise SampleError(where, f"must be an object, got {type_name(data)}")
    device = check_value(f"{where}.device", data.get("device"), PORT_NAME)
    number = check_value(f"{where}.port", data.get("port"), PORT_NUMBER)
    words = {k: check_value(f"{where}.{k}", data[k], STR) for k in PORT_WORDS if data.get(k) is not None}
    rate = _checked_fields(data, {"rate_gbps": PORT_RULES["rate_gbps"]}, where + ".").get("rate_gbps")
    counters = data.get("counters") or {}
    if not isinstance(counters, Mapping):
        raise SampleError(f"{where}.counters", f"must be an object, got {type_name(counters)}")
    unknown = [name for name in counters if name not in PORT_COUNTERS]
    if unknown:
        raise SampleError(f"{where}.counters.{unknown[0]}", f"is not one of {', '.join(PORT_COUNTERS)}")
    counts = _checked_fields(counters, PORT_RULES, f"{where}.counters.")
    ordered = tuple((name, counts[name]) for name in PORT_COUNTERS if name in counts)
    return PortSample(device, number, rate_gbps=rate, counters=ordered, **words)


def parse_host(data: Any, field: str = "host") -> HostSample:
    """Build a HostSample from a JSON object."""
    host = _HOST.build(data) if type(data) is dict else None
    return host if host is not None else HostSample(**_checked_fields(data, HOST_RULES, field + "."))


def parse_rank(data: Any, where: str) -> RankSample:
    """Build a RankSample; ``rank`` is required, ``phase`` one of RANK_PHASES."""
    rank = _RANK.build(data) if type(data) is dict else None
    if rank is not None and rank.rank is not None:
        phase, pid, stack = data.get("phase"), data.get("pid"), data.get("stack")
        if phase is not None:
            _RANK.put(rank, "phase", _checked_phase(phase, where))
        if pid is not None:
            _RANK.put(rank, "pid", check_value(where + ".pid", pid, COUNT))
        if stack is not None:
            _RANK.put(rank, "stack", parse_stack(stack, where + ".stack"))
        return rank
    values = _checked_fields(data, RANK_RULES, where + ".")
    if "rank" not in values:
        raise SampleError(where + ".rank", "is required")
    phase = data.get("phase")
    if phase is not None:
        values["phase"] = _checked_phase(phase, where)
    pid = data.get("pid")
    if pid is not None:
        values["pid"] = check_value(where + ".pid", pid, COUNT)
    stack = data.get("stack")
    if stack is not None:
        values["stack"] = parse_stack(stack, where + ".stack")
    return RankSample(**values)


def parse_stack(data: Any, field: str) -> tuple[StackFrame, ...]:
    """A heartbeat's stack: at most ``MAX_STACK_FRAMES`` objects ``{"file", "line", "function"}``, innermost last."""
    if not isinstance(data, (list, tuple)):
        raise SampleError(field, f"must be an array of frames, got {type_name(data)}")
    if len(data) > MAX_STACK_FRAMES:
        raise SampleError(field, f"has {len(data)} frames; at most {MAX_STACK_FRAMES} are accepted")
    return tuple(_parse_frame(frame, f"{field}[{i}]") for i, frame in enumerate(data))


def _parse_frame(data: Any, where: str) -> StackFrame:
    if not isinstance(data, Mapping):
        raise SampleError(where, f"must be an object with file, line and function, got {type_name(data)}")
    values = []
    for name, rule in (("file", STR), ("line", COUNT), ("function", STR)):
        value = data.get(name)
        if value is None:
            raise SampleError(f"{where}.{name}", "is required")
        values.append(check_value(f"{where}.{name}", value, rule))
    return StackFrame(*values)


def _checked_phase(phase: Any, where: str) -> str:
    if phase not in RANK_PHASES:
        shown = repr(phase) if isinstance(phase, str) else f"a {type_name(phase)}"
        raise SampleError(where + ".phase", f"unknown phase {shown}; known: {', '.join(RANK_PHASES)}")
    return phase


def parse_training(data: Any, max_ranks: int = DEFAULT_MAX_RANKS) -> TrainingSample:
    """Build a TrainingSample from the contract's training payload.

    Raises SampleError naming the field for a non-object body, a wrong type, a
    non-finite or out-of-range value, a bad or duplicate rank entry, more than
    ``max_ranks`` ranks, ``avg_seq_len > max_seq_len``, or no measurement at all.
    """
    if not isinstance(data, Mapping):
        raise SampleError("", f"body must be a JSON object, got {type_name(data)}")
    sample = _TRAINING.build(data) if type(data) is dict else None
    if sample is not None:
        ranks = data.get("ranks")
        if ranks is not None:
            _TRAINING.put(sample, "ranks", _parse_ranks(ranks, max_ranks))
        _check_training(sample.avg_seq_len, sample.max_seq_len, bool(sample.ranks) or has_job_measurement(sample))
        return sample
    values = _checked_fields(data, TRAINING_RULES, "")
    ranks = data.get("ranks")
    if ranks is not None:
        values["ranks"] = _parse_ranks(ranks, max_ranks)
    measures = bool(values.get("ranks")) or any(k in values for k in TRAINING_MEASUREMENT_FIELDS)
    _check_training(values.get("avg_seq_len"), values.get("max_seq_len"), measures)
    return TrainingSample(**values)


def _check_training(avg: float | None, longest: float | None, measures: bool) -> None:
    """What a training payload must hold beyond its fields' rules: a sane sequence length and a measurement."""
    if avg is not None and longest is not None and avg > longest:
        raise SampleError("avg_seq_len", f"must be <= max_seq_len ({longest!r}), got {avg!r}")
    if not measures:
        raise SampleError("", "payload has no measurement (e.g. step_time_ms, tokens_per_sec or ranks)")


def has_job_measurement(sample: TrainingSample) -> bool:
    """Whether a report measures the job (a step time, a rate, a wait…), not only its identity or its ranks."""
    return any(value is not None for value in _TRAINING_MEASURED(sample))


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


# One table per sample class for validation's fast path (see .builder).
_GPU: SampleBuilder[GpuSample] = SampleBuilder(GpuSample, GPU_RULES)
_HOST: SampleBuilder[HostSample] = SampleBuilder(HostSample, HOST_RULES)
_RANK: SampleBuilder[RankSample] = SampleBuilder(RankSample, RANK_RULES)
_TRAINING: SampleBuilder[TrainingSample] = SampleBuilder(TrainingSample, TRAINING_RULES)
_TRAINING_MEASURED = attrgetter(*TRAINING_MEASUREMENT_FIELDS)
