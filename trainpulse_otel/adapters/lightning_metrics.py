"""The ``lightning`` adapter: ``ThroughputMonitor`` metrics and common callback keys.

``lightning.fabric.utilities.throughput.Throughput.compute`` returns ``time``,
``batches``, ``samples``, ``lengths`` (running totals), per-device rates
``device/batches_per_sec``, ``device/samples_per_sec``, ``device/items_per_sec``,
``device/flops_per_sec``, ``device/mfu`` (a fraction of the device's peak), and
the whole-job ``batches_per_sec``, ``samples_per_sec``, ``items_per_sec``,
``flops_per_sec`` **only when world_size > 1**. The rates appear once the rolling
window (100 batches by default) is full. The Trainer callback prefixes every key
with the stage (``train/``, ``validate/``, ``test/``, ``predict/``); Fabric's
``ThroughputMonitor`` logs them bare. Also read: ``LearningRateMonitor``'s
``lr-<Optimizer>`` (``/pg1`` for the first group), ``grad_norm``'s
``grad_2.0_norm_total``, and ``train_loss``/``train/loss``.

A "batch" is one micro-batch, so step time = gradient_accumulation_steps /
device batches per second (gradient_accumulation_steps defaults to 1).
:func:`translate_bar` maps a console progress bar's record (:mod:`.lightning_text`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import (
    Adapter,
    Fields,
    Rule,
    Translation,
    as_number,
    note_not_training,
    set_from_first,
    whole,
    world_size,
)
from .lightning_text import SECONDS_PER_IT

STAGE = "train/"
OTHER_STAGES = ("validate/", "test/", "predict/", "sanity_check/")
#: ThroughputMonitor keys (looked up with the stage prefix when the dict has one).
THROUGHPUT_RULES: tuple[Rule, ...] = (
    Rule("device/mfu", "mfu"),
    Rule("device/flops_per_sec", "tflops", 1e-12),
    Rule("samples_per_sec", "samples_per_sec"),
    Rule("items_per_sec", "tokens_per_sec"),
)
CALLBACK_RULES: tuple[Rule, ...] = (
    Rule("train/loss", "loss"),
    Rule("train_loss", "loss"),
    Rule("grad_2.0_norm_total", "grad_norm"),
)
_LR_KEY = re.compile(r"^lr-[A-Za-z0-9_]+(/pg1)?$")
#: The progress bar's postfix (``self.log(..., prog_bar=True)``): NeMo's names first, then Lightning's.
BAR_RULES: tuple[Rule, ...] = (
    Rule("reduced_train_loss", "loss"),
    Rule("train_loss_step", "loss"),
    Rule("train_loss", "loss"),
    Rule("loss", "loss"),
    Rule("gradient_norm", "grad_norm"),
    Rule("grad_norm", "grad_norm"),
    Rule("lr", "learning_rate"),
    Rule("train_step_timing in s", "step_time_ms", 1000.0),
    Rule("global_step", "global_step"),
    Rule("global_batch_size", "global_batch_size"),
)


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map a Lightning metrics dict (stage-prefixed or bare) to the contract."""
    fields = Fields.from_payload(payload)
    stage = STAGE if any(k.startswith(STAGE) for k in fields.data) else ""
    _infer_world_size(fields, stage)
    fields.apply(Rule(stage + r.key, r.field, r.scale) for r in THROUGHPUT_RULES)
    fields.apply(CALLBACK_RULES)
    _step_time(fields, stage + "device/batches_per_sec")
    _job_rate(fields, stage + "device/samples_per_sec", "samples_per_sec")
    _job_rate(fields, stage + "device/items_per_sec", "tokens_per_sec")
    set_from_first(fields, lambda k: bool(_LR_KEY.match(k)), "learning_rate")
    note_not_training(fields, OTHER_STAGES)
    return fields.finish("lightning")


def translate_bar(record: Mapping[str, Any], context: Mapping[str, Any]) -> Translation:
    """Map one progress-bar draw (:mod:`.lightning_text`): its postfix metrics, and its speed as the step
    time when NeMo's ``train_step_timing`` is absent (a bar counts micro-batches, hence the note)."""
    fields = Fields.from_log(record, context, "no progress bar")
    fields.apply(BAR_RULES)
    if "global_step" in fields.out:
        fields.out["global_step"] = int(fields.out["global_step"])  # exact: lightning_text keeps no rounded one
    seconds = fields.number(SECONDS_PER_IT)
    if seconds is not None and fields.wants("step_time_ms"):
        accumulation = fields.data.get("gradient_accumulation_steps")
        accumulation = 1.0 if accumulation is None else as_number("gradient_accumulation_steps", accumulation)
        fields.set("step_time_ms", 1000.0 * seconds * accumulation, SECONDS_PER_IT)
        fields.note(f"step_time_ms = the bar's seconds per batch x gradient_accumulation_steps ({accumulation:g})")
    note_not_training(fields, ("val_",))
    return fields.finish("lightning")


def _infer_world_size(fields: Fields, stage: str) -> None:
    """Derive the world size from Lightning's own key set when it is not given."""
    device = fields.data.get(stage + "device/samples_per_sec")
    if fields.has("world_size") or not isinstance(device, (int, float)) or device <= 0:
        return
    job = fields.data.get(stage + "samples_per_sec")
    if job is None:
        fields.set("world_size", 1, stage + "device/samples_per_sec")
        fields.note("world_size = 1: Lightning leaves out the whole-job rates only when world_size is 1")
    elif isinstance(job, (int, float)):
        ratio = whole(round(job / device, 6))
        if ratio:
            fields.set("world_size", ratio, stage + "samples_per_sec")
            fields.note(f"world_size = samples_per_sec / device/samples_per_sec = {ratio}")


def _step_time(fields: Fields, key: str) -> None:
    per_sec = fields.number(key) if fields.has(key) else None
    if not per_sec:
        return
    accumulation = fields.data.get("gradient_accumulation_steps")
    accumulation = 1.0 if accumulation is None else as_number("gradient_accumulation_steps", accumulation)
    fields.set("step_time_ms", 1000.0 * accumulation / per_sec, key)
    fields.note(f"step_time_ms = 1000 x gradient_accumulation_steps ({accumulation:g}) / {key}")


def _job_rate(fields: Fields, device_key: str, field_name: str) -> None:
    if not fields.has(device_key):
        return
    per_device = fields.number(device_key)  # read even when the job rate came directly
    if not fields.wants(field_name):
        return
    world = world_size(fields)
    if world is None:
        fields.note(f"{device_key} is per device; {field_name} needs world_size")
        return
    fields.set(field_name, per_device * world, device_key)  # type: ignore[operator]


ADAPTER = Adapter("lightning", translate, description="Lightning ThroughputMonitor and callback metrics")
normalize = ADAPTER.normalize
