"""The ``deepspeed`` adapter: monitor events, config keys and console lines.

Monitor events are the ``(name, value, x)`` tuples rank 0 hands every monitor
backend (``deepspeed/runtime/engine.py``): ``Train/Samples/train_loss``,
``Train/Samples/lr``, ``Train/Samples/loss_scale`` (fp16) and, with
``wall_clock_breakdown`` or the flops profiler,
``Train/Samples/elapsed_time_ms_{forward,backward,backward_allreduce,step}``.
Send them flat (``{"Train/Samples/train_loss": 2.31, ..., "global_samples": 40960}``)
or as events (``{"events": [["Train/Samples/train_loss", 2.31, 40960], ...]}``,
or objects with ``name``/``value``/``global_samples``), with the config keys
``train_batch_size``, ``train_micro_batch_size_per_gpu`` and
``gradient_accumulation_steps`` beside them. Console lines (``text/plain``)
are read by :mod:`.deepspeed_text`.

Two traps: the x-axis counts samples, not steps (``global_step`` is x /
``train_batch_size``, left out with a note without it); ThroughputTimer's
samples/s leave out the wait for the next batch. Every mapping: docs/api.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..samples import SampleError
from .base import Adapter, Fields, Rule, Translation, as_number, whole
from .deepspeed_text import BREAKDOWN_PREFIX, LOSS_SCALE, MICRO_STEP, OVERFLOWS, SKIPPED_TOTAL, newest_record

MONITOR = "Train/Samples/"
RULES: tuple[Rule, ...] = (
    Rule(MONITOR + "train_loss", "loss"),
    Rule(MONITOR + "lr", "learning_rate"),
    Rule(MONITOR + "loss_scale", "loss_scale"),
    Rule(OVERFLOWS, "skipped_steps"),
    Rule(LOSS_SCALE, "loss_scale"),
    Rule("lr", "learning_rate"),
    Rule("iter time (s)", "step_time_ms", 1000.0),
    Rule("samples/sec", "samples_per_sec"),
    Rule("CurrSamplesPerSec", "samples_per_sec"),
    Rule("CurrSamplesPerSec" + MICRO_STEP, "samples_per_sec"),
    Rule("SamplesPerSec" + MICRO_STEP, "samples_per_sec"),  # 2020-22: the running average, the only rate
    Rule("train_batch_size", "global_batch_size"),
    Rule("train_micro_batch_size_per_gpu", "micro_batch_size"),
)


def _timer_names(prefix: str, forward: str, backward: str, step: str, allreduce: str) -> tuple[str, str, str, str]:
    return prefix + forward, prefix + backward, prefix + step, prefix + allreduce


#: (forward, backward, step, all-reduce) timer names: monitor events, console, older console.
BREAKDOWNS: tuple[tuple[str, str, str, str], ...] = (
    _timer_names(MONITOR + "elapsed_time_ms_", "forward", "backward", "step", "backward_allreduce"),
    _timer_names(BREAKDOWN_PREFIX, "fwd", "bwd", "step", "bwd_allreduce"),
    _timer_names(BREAKDOWN_PREFIX, "forward", "backward", "step", "backward_allreduce"),
)
PIPE_WAITS = (BREAKDOWN_PREFIX + "pipe_recv_input", BREAKDOWN_PREFIX + "pipe_recv_grad")


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map monitor events (flat or as an ``events`` list) and DeepSpeed config keys."""
    if isinstance(payload, Mapping) and "events" in payload:
        payload = _flatten_events(payload)
    return _finish(Fields.from_payload(payload))


def translate_text(text: str, context: Mapping[str, Any]) -> Translation:
    """Map the newest step of DeepSpeed console output."""
    return translate_record(newest_record(text), context)


def translate_record(record: Mapping[str, Any] | None, context: Mapping[str, Any]) -> Translation:
    """Map one record of :mod:`.deepspeed_text` (a step with its breakdown, or an overflow event)."""
    missing = "no DeepSpeed throughput, progress, pipeline or wall-clock breakdown line in the text"
    return _finish(Fields.from_log(record, context, missing))


def _finish(fields: Fields) -> Translation:
    fields.raw(SKIPPED_TOTAL)  # the engine's running count: a reader of successive steps takes differences
    fields.apply(RULES)
    for names in BREAKDOWNS:
        _breakdown(fields, *names)
    _pipeline_waits(fields)
    _step_from_samples(fields)
    _step_time_from_rate(fields)
    return fields.finish("deepspeed")


def _flatten_events(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``events`` as name -> newest value, plus ``global_samples`` (the largest x)."""
    events = payload["events"]
    if not isinstance(events, list):
        raise SampleError("events", "must be an array of [name, value, global_samples] events")
    flat: dict[str, Any] = {k: v for k, v in payload.items() if k != "events"}
    newest: dict[str, float] = {}
    for i, event in enumerate(events):
        name, value, x = _event(event, f"events[{i}]")
        if name not in newest or x >= newest[name]:
            newest[name], flat[name] = x, value
    if newest:
        flat.setdefault("global_samples", max(newest.values()))
    return flat


def _event(event: Any, where: str) -> tuple[str, Any, float]:
    if isinstance(event, Mapping):
        event = (event.get("name"), event.get("value"), event.get("global_samples", event.get("step")))
    if not isinstance(event, (list, tuple)) or len(event) != 3 or not isinstance(event[0], str):
        raise SampleError(where, "must be [name, value, global_samples] or {name, value, global_samples}")
    return event[0], event[1], as_number(where + ".global_samples", event[2])


def _breakdown(fields: Fields, forward: str, backward: str, step: str, allreduce: str) -> None:
    """fwd + bwd + step is the engine's step time; bwd_allreduce its gradient all-reduce."""
    if all(fields.has(k) for k in (forward, backward, step)) and fields.wants("step_time_ms"):
        total = sum(fields.number(k) for k in (forward, backward, step))  # type: ignore[misc]
        fields.set("step_time_ms", total, forward)
        fields.note(
            f"step_time_ms = {forward} + {backward} + {step} "
            "(forward() to step(); the wait for the next batch is not in it)"
        )
    if fields.has(allreduce):
        fields.set("all_reduce_wait_ms", fields.number(allreduce), allreduce)


def _pipeline_waits(fields: Fields) -> None:
    present = [k for k in PIPE_WAITS if fields.has(k)]
    if present:
        fields.set("sync_wait_ms", sum(fields.number(k) for k in present), present[0])  # type: ignore[misc]
        fields.note("sync_wait_ms = pipe_recv_input + pipe_recv_grad (pipeline stages waiting for their peers)")


def _batch_size(fields: Fields) -> float | None:
    value = fields.out.get("global_batch_size", fields.data.get("global_batch_size"))
    source = fields.mapped.get("global_batch_size", "global_batch_size")
    return as_number(source, value) if value is not None else None


def _step_from_samples(fields: Fields) -> None:
    """The monitor's x-axis (samples) as a step, when the global batch size says how."""
    explicit = fields.has("global_step") or fields.has("step") or not fields.wants("global_step")
    if not fields.has("global_samples") or explicit:
        return
    samples, batch = fields.number("global_samples"), _batch_size(fields)
    step = whole(samples / batch) if batch else None  # type: ignore[operator]
    if step is None:
        fields.note(
            f"global_samples {samples:g} is the monitor's x-axis (samples, not steps); "
            "give train_batch_size to turn it into global_step"
        )
        return
    fields.set("global_step", step, "global_samples")
    fields.note(f"global_step = global_samples / train_batch_size = {samples:g} / {batch:g}")


def _step_time_from_rate(fields: Fields) -> None:
    """ThroughputTimer: step time = global batch / CurrSamplesPerSec (forward() to step() only)."""
    rate, batch = fields.out.get("samples_per_sec"), _batch_size(fields)
    if fields.mapped.get("samples_per_sec") != "CurrSamplesPerSec" or not fields.wants("step_time_ms"):
        return
    if batch and rate:
        fields.set("step_time_ms", 1000.0 * batch / rate, "CurrSamplesPerSec")
        fields.note("step_time_ms = 1000 x train_batch_size / CurrSamplesPerSec")


ADAPTER = Adapter("deepspeed", translate, translate_text, description="DeepSpeed monitor events and console lines")
normalize = ADAPTER.normalize
parse_text = ADAPTER.parse_text
