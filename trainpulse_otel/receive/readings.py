"""How each of TrainPulse's input instruments is judged when a node's export brings it back: its points'
attributes (what GPU, rank or reason they are about) and their values (the sample model's field rules).

A :class:`Reading` per instrument suffix (:data:`READINGS`): the check group
its attribute sets are remembered under, the rule of its values and the field
an error names. Both checks are the sample model's own (``check_value``), so
a value a node daemon could not have held is refused with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..samples import (
    GPU_RULES,
    HOST_RULES,
    PORT_RULES,
    RANK_PHASES,
    RANK_RULES,
    THROTTLE_REASONS,
    TRAINING_RULES,
    Rule,
    SampleError,
    check_value,
)
from ..samples.validation import COUNT, STR, XID_CODE
from ..telemetry.catalog import (
    ALL_INPUTS,
    GPU,
    GPU_THROTTLE,
    GPU_XID,
    HOST,
    NODE,
    NONFINITE,
    PORT,
    PORT_INFO,
    RANK,
    RANK_PHASE,
    TRAINING,
    TRAINING_INFO,
    TRAINING_INFO_ATTRIBUTES,
    MetricSpec,
)
from ..telemetry.conversion import NONFINITE_FIELDS
from .points import Attributes

SPECS: dict[str, MetricSpec] = {spec.suffix: spec for spec in ALL_INPUTS}
RULES: dict[str, Mapping[str, Rule]] = {
    GPU: GPU_RULES,
    HOST: HOST_RULES,
    TRAINING: TRAINING_RULES,
    RANK: RANK_RULES,
    PORT: PORT_RULES,
}
NONFINITE_TOKENS = ("nan", "inf", "-inf")
#: Scopes whose points, when they name a ``hostname``, are another node's (relayed by a job daemon).
NODE_LOCAL = (GPU, HOST)


@dataclass(frozen=True)
class Reading:
    """How one instrument's points are judged: the check group of their attribute sets, the rule of their value."""

    spec: MetricSpec
    group: str  # the scope for an identity (a GPU, a rank), the instrument itself when its attributes say more
    rule: Rule | None  # None: the value is always 1, the attributes say it all
    field: str  # the field an error names
    scale: float
    relayed: bool  # points naming a ``hostname`` are another node's, relayed by a job daemon

    def fit(self, values: Sequence[float | int], value_type: type | None) -> bool:
        """Whether every value (none of them None; all of ``value_type``, None when they differ) is exactly of
        the rule's type inside its bounds, once scaled: the validators' own fast path, for a metric's values at
        once (C loops: least, greatest and sum — a NaN makes the sum NaN). One that is not is judged by
        :func:`value_error`."""
        rule = self.rule
        if rule is None or not values:
            return True
        scaled = values if self.scale == 1.0 else [v / self.scale for v in values]
        if (value_type if self.scale == 1.0 else float) is not rule.exact_type:
            return False
        return (
            rule.floor <= min(scaled)
            and max(scaled) <= rule.ceiling
            and not (rule.exact_type is float and math.isnan(sum(scaled)))
        )

    def judge(self, attributes: Attributes) -> str | None:
        """What is wrong with a point's attributes (None: nothing)."""
        try:
            checked_attributes(self.spec, attributes)
        except SampleError as exc:
            return str(exc)
        return None


def reading(spec: MetricSpec) -> Reading:
    relayed = spec.scope in NODE_LOCAL
    if spec is GPU_XID:
        return Reading(spec, spec.suffix, COUNT, "xid_counts.count", 1.0, relayed)
    if spec is GPU_THROTTLE:
        return Reading(spec, spec.suffix, Rule("int", 0, 1), "throttle_reasons", 1.0, relayed)
    if spec in (NONFINITE, TRAINING_INFO, RANK_PHASE, PORT_INFO):
        return Reading(spec, spec.suffix, None, "", 1.0, relayed)
    rule = RULES[spec.scope][spec.field] if spec.scope in RULES else None
    return Reading(spec, spec.scope, rule, f"{spec.scope}.{spec.field}", spec.scale, relayed)


#: How each input instrument is read, by suffix (a node's own liveness, ``node.*``, is a job daemon's output).
READINGS: dict[str, Reading] = {suffix: reading(spec) for suffix, spec in SPECS.items() if spec.scope != NODE}


def value_error(reading: Reading, scaled: float | int) -> str | None:
    """What ``check_value`` finds wrong with a (scaled) value under the reading's rule (None: nothing)."""
    if reading.rule is None:
        return None
    try:
        check_value(reading.field, scaled, reading.rule)
    except SampleError as exc:
        return str(exc)
    return None


def checked_attributes(spec: MetricSpec, attributes: Attributes) -> None:
    """Raise SampleError naming the attribute of a point that does not say what it is about."""
    if spec is GPU_XID:
        attribute(attributes, "gpu.index", COUNT)
        attribute(attributes, "xid", XID_CODE)
    elif spec is GPU_THROTTLE:
        attribute(attributes, "gpu.index", COUNT)
        one_of(attributes, "reason", THROTTLE_REASONS)
    elif spec is NONFINITE:
        one_of(attributes, "field", NONFINITE_FIELDS)
        one_of(attributes, "value", NONFINITE_TOKENS)
        attribute(attributes, "rank", COUNT, required=False)
    elif spec is TRAINING_INFO:
        for key in TRAINING_INFO_ATTRIBUTES.values():
            attribute(attributes, key, STR, required=False)
    elif spec is RANK_PHASE:
        attribute(attributes, "rank", COUNT)
        one_of(attributes, "phase", RANK_PHASES)
        attribute(attributes, "process.pid", COUNT, required=False)
    elif spec is PORT_INFO:
        identity(PORT, attributes)
        for key in ("state", "phys_state", "link_layer"):
            attribute(attributes, key, STR, required=False)
    else:
        identity(spec.scope, attributes)


def identity(scope: str, attributes: Attributes) -> None:
    """The attributes that say which GPU or rank a point is about."""
    if scope == GPU:
        attribute(attributes, "gpu.index", COUNT)
        attribute(attributes, "gpu.uuid", STR, required=False)
        attribute(attributes, "gpu.name", STR, required=False)
    elif scope == PORT:
        attribute(attributes, "ib.device", STR)
        attribute(attributes, "ib.port", COUNT)
        attribute(attributes, "hostname", STR, required=False)
    elif scope == RANK:
        attribute(attributes, "rank", COUNT)
        attribute(attributes, "gpu.index", COUNT, required=False)
        attribute(attributes, "hostname", STR, required=False)


def attribute(attributes: Attributes, key: str, rule: Rule, required: bool = True) -> None:
    """Check the attribute ``key`` against ``rule`` (a bool is no number here)."""
    if key not in attributes:
        if required:
            raise SampleError(f"attribute {key}", "is required")
        return
    check_value(f"attribute {key}", attributes[key], rule)


def one_of(attributes: Attributes, key: str, known: tuple[str, ...]) -> None:
    value = attributes.get(key)
    if value not in known:
        raise SampleError(f"attribute {key}", f"must be one of {', '.join(known)}, got {value!r}")
