"""Turn the steps buffered over one interval into one training report. Pure.

The training thread only appends :class:`StepRecord` tuples; at collection time the drainer
hands them here, with the fields given to ``record()`` and what the monitor knows about the job
(:class:`JobContext`), and gets one :class:`~trainpulse_otel.samples.TrainingSample` back::

    sample = build_sample(aggregate(records, job, used_phases, global_step), job, given)

Each job-level field is a mean per step over the interval — ``step_time_ms`` the whole
iteration (the ``step()`` block plus the wait for the batch and the phases between steps), the
waits per phase once measured, ``tokens_per_sec`` the whole job's — except ``checkpoint_ms``, the
longest save of a step (a mean would hide a one-off), and a non-finite loss, which wins over a
later finite one. What each field means, precisely: docs/instrumentation.md ("What the reported
fields mean").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...mfu import ModelShape
from ...samples import TRAINING_MEASUREMENT_FIELDS, RankSample, TrainingSample

#: Phases a step can spend time in, in the order StepRecord.phases_s keeps them; ``compute`` to ``idle`` feed no
#: field of their own but name what the rank is doing in its heartbeat (the contract's phases). A checkpoint load
#: (a resume) is the restart's time, not a step's: it is reported apart (``checkpoint_load_ms``), never in
#: ``step_time_ms``.
PHASES: tuple[str, ...] = (
    "data",
    "tokenizer",
    "checkpoint",
    "all_reduce",
    "sync",
    "checkpoint_load",
    "compute",
    "optimizer",
    "eval",
    "idle",
)
PHASE_INDEX: dict[str, int] = {name: i for i, name in enumerate(PHASES)}
DATA, TOKENIZER, CHECKPOINT, ALL_REDUCE, SYNC, CHECKPOINT_LOAD = range(6)
#: Mean-per-step phases and the training field each fills.
MEAN_PHASE_FIELDS: tuple[tuple[int, str], ...] = (
    (DATA, "data_wait_ms"),
    (TOKENIZER, "tokenizer_wait_ms"),
    (SYNC, "sync_wait_ms"),
    (ALL_REDUCE, "all_reduce_wait_ms"),
)


class StepRecord(NamedTuple):
    """One finished step as the hot path appended it (times in seconds)."""

    end_ts: float  # unix time the step ended
    step_s: float  # the step() block
    outside_s: float  # phases measured outside any step since the previous one
    phases_s: Sequence[float]  # per PHASES, inside or outside the block
    tokens: float | None
    samples: float | None
    seq_lens: Any  # a sequence of ints, or anything with .tolist()
    padded_len: float | None


@dataclass(frozen=True)
class JobContext:
    """What the monitor knows about the job, fixed between intervals."""

    fields: Mapping[str, Any]  # validated job fields (model_name, framework, precision, …)
    world_size: int = 1
    data_parallel_size: int = 1
    shape: ModelShape | None = None
    flops_per_token: float | None = None  # given outright: wins over ``shape``
    seq_len: float | None = None  # for the attention term when steps give no lengths
    causal: bool = False
    peak_flops: float | None = None


@dataclass(frozen=True)
class SeqStats:
    """Real and padded token counts over the samples that reported lengths."""

    real_tokens: float
    padded_tokens: float
    samples: int


def seq_stats(records: Sequence[StepRecord]) -> SeqStats | None:
    """Sum real lengths and padded lengths over every step that gave ``seq_lens``."""
    real = padded = 0.0
    count = 0
    for record in records:
        lengths = _lengths(record.seq_lens)
        if not lengths:
            continue
        longest = max(lengths)
        pad_to = max(record.padded_len or longest, longest)
        real += sum(lengths)
        padded += pad_to * len(lengths)
        count += len(lengths)
    return SeqStats(real, padded, count) if count else None


def _lengths(seq_lens: Any) -> list[float]:
    if seq_lens is None:
        return []
    if hasattr(seq_lens, "tolist"):
        seq_lens = seq_lens.tolist()
    if isinstance(seq_lens, (int, float)):
        return [float(seq_lens)]
    return [float(x) for x in seq_lens if x is not None and x >= 0]


def aggregate(
    records: Sequence[StepRecord],
    job: JobContext,
    used_phases: frozenset[int],
    global_step: int | None,
    ranks: tuple[RankSample, ...] = (),
) -> dict[str, Any]:
    """The training fields for one interval's steps (empty dict when there are none)."""
    out: dict[str, Any] = {}
    if records:
        out.update(_timing(records, used_phases))
        out.update(_throughput(records, job))
        out["timestamp"] = records[-1].end_ts
    if global_step is not None:
        out["global_step"] = global_step
    if ranks:
        out["ranks"] = ranks
    return out


def _timing(records: Sequence[StepRecord], used_phases: frozenset[int]) -> dict[str, Any]:
    n = len(records)
    out: dict[str, Any] = {"step_time_ms": 1000.0 * sum(r.step_s + r.outside_s for r in records) / n}
    for index, field in MEAN_PHASE_FIELDS:
        if index in used_phases:
            out[field] = 1000.0 * sum(r.phases_s[index] for r in records) / n
    if CHECKPOINT in used_phases:
        out["checkpoint_ms"] = 1000.0 * max(r.phases_s[CHECKPOINT] for r in records)
    if CHECKPOINT_LOAD in used_phases:
        out["checkpoint_load_ms"] = 1000.0 * sum(r.phases_s[CHECKPOINT_LOAD] for r in records)
    return out


def _throughput(records: Sequence[StepRecord], job: JobContext) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tokens_per_sec = _rate(records, "tokens", job.data_parallel_size)
    samples_per_sec = _rate(records, "samples", job.data_parallel_size)
    stats = seq_stats(records)
    if stats is not None:
        out["avg_seq_len"] = stats.real_tokens / stats.samples
        out["max_seq_len"] = stats.padded_tokens / stats.samples
    if tokens_per_sec is not None:
        out["tokens_per_sec"] = tokens_per_sec
        out.update(_utilisation(tokens_per_sec, job, out.get("max_seq_len")))
    if samples_per_sec is not None:
        out["samples_per_sec"] = samples_per_sec
    return out


def _rate(records: Sequence[StepRecord], attr: str, data_parallel: int) -> float | None:
    """Σ count / Σ iteration time over the steps that gave a count, × data-parallel size."""
    total = seconds = 0.0
    for record in records:
        count = getattr(record, attr)
        if count is not None:
            total += float(count)
            seconds += record.step_s + record.outside_s
    if seconds <= 0:
        return None
    return total / seconds * data_parallel


def _utilisation(tokens_per_sec: float, job: JobContext, padded_len: float | None) -> dict[str, float]:
    """Achieved TFLOP/s per device and MFU, when FLOPs per token are known."""
    per_token = job.flops_per_token
    if per_token is None and job.shape is not None:
        per_token = job.shape.flops_per_token(padded_len or job.seq_len, job.causal)
    if not per_token:
        return {}
    achieved = per_token * tokens_per_sec / max(1, job.world_size)
    out = {"tflops": achieved / 1e12}
    if job.peak_flops:
        out["mfu"] = min(1.0, achieved / job.peak_flops)
    return out


class IntervalNumerics:
    """The interval's losses given to ``record()``, one per step, folded so no divergence hides.

    The report carries the last ``loss`` and ``grad_norm`` given, except that
    a NaN or infinite one anywhere in the interval is kept instead (a later
    finite value must not hide that the model diverged); ``loss_max`` is the
    highest finite loss given, so a one-step spike inside the interval is still
    judged. ``skipped_steps`` given per step add up.
    """

    __slots__ = ("_losses", "_nonfinite", "_skipped", "_skipped_given")

    def __init__(self) -> None:
        self._losses: list[float] = []
        self._nonfinite: dict[str, float] = {}
        self._skipped = 0
        self._skipped_given = False

    def add(self, name: str, value: Any) -> Any:
        """Note one validated value; returns it (the caller keeps the last one given)."""
        if name in ("loss", "grad_norm") and not math.isfinite(value):
            self._nonfinite.setdefault(name, value)
        elif name == "loss":
            self._losses.append(value)
        elif name == "skipped_steps":
            self._skipped += value
            self._skipped_given = True
        return value

    def fields(self) -> dict[str, Any]:
        """What overrides the last values given: the first non-finite ones, the highest loss, skipped steps."""
        out: dict[str, Any] = dict(self._nonfinite)
        if len(self._losses) > 1:
            out["loss_max"] = max(self._losses)
        if self._skipped_given:
            out["skipped_steps"] = self._skipped
        return out


def build_sample(fields: Mapping[str, Any], job: JobContext, given: Mapping[str, Any]) -> TrainingSample | None:
    """Job fields < measured fields < fields given to ``record()``; None with nothing measured."""
    merged = {**job.fields, **fields, **given}
    if not merged.get("ranks") and not any(merged.get(name) is not None for name in TRAINING_MEASUREMENT_FIELDS):
        return None
    if job.world_size > 1:
        merged.setdefault("world_size", job.world_size)
    return TrainingSample(**merged)
