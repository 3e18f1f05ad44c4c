"""The ``torchtitan`` adapter: ``MetricsProcessor.log`` dicts and console lines.

Keys (torchtitan ``components/metrics.py``), logged every ``metrics.log_freq`` steps:
``loss_metrics/global_avg_loss``, ``loss_metrics/global_max_loss``, ``grad_norm``,
``throughput(tps)``, ``tflops``, ``mfu(%)``, ``time_metrics/end_to_end(s)``,
``time_metrics/data_loading(s)``, ``time_metrics/data_loading(%)``,
``memory/max_active(GiB|%)``, ``memory/max_reserved(GiB|%)``,
``memory/num_alloc_retries``, ``memory/num_ooms``, plus the trainer's extras
``n_tokens_seen`` (``ntokens_seen`` in older releases) and ``lr`` (or
``lr/<Optimizer>[/<group>]``). Validation uses ``validation_metrics/*``.

Unit traps: ``mfu(%)`` is a percent (TrainPulse wants 0-1); ``throughput(tps)``
and ``tflops`` are per device (tps = local tokens / (time * non-data-parallel
size)), so the job's tokens/s is tps x world_size, which needs the world size;
the ``time_metrics`` are seconds per step.

The console line (``[titan] ... - INFO - step: 10  loss:  7.1234  grad_norm:  1.2345
memory: 31.94GiB(40.37%)  tps: 6,812  tflops: 394.54  mfu: 39.89%``; ``wps`` in old
releases) is read as ``text/plain``: the newest complete training line wins.
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
    first_present,
    log_lines,
    note_not_training,
    scaled_by_world,
    set_from_first,
)

DICT_RULES: tuple[Rule, ...] = (
    Rule("loss_metrics/global_avg_loss", "loss"),
    Rule("loss_metrics/global_max_loss", "loss_max"),
    Rule("mfu(%)", "mfu", 0.01),
    Rule("time_metrics/end_to_end(s)", "step_time_ms", 1000.0),
    Rule("time_metrics/data_loading(s)", "data_wait_ms", 1000.0),
    Rule("lr", "learning_rate"),
)
TEXT_RULES: tuple[Rule, ...] = (Rule("mfu", "mfu", 0.01),)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"\bstep:\s*(\d+)")
_PAIR = re.compile(
    r"\b(loss|grad_norm|tps|wps|tflops|mfu):\s*(-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?|-?(?:nan|inf))(%?)", re.IGNORECASE
)


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map one ``MetricsProcessor.log`` dict; the step comes beside it (``step``)."""
    fields = Fields.from_payload(payload)
    fields.apply(DICT_RULES)
    set_from_first(fields, lambda k: k.startswith("lr/"), "learning_rate")
    scaled_by_world(fields, "throughput(tps)", "tokens_per_sec", "tokens/s")
    note_not_training(fields, ("validation_metrics/",))
    return fields.finish("torchtitan")


def translate_text(text: str, context: Mapping[str, Any]) -> Translation:
    """Read the newest complete training line of torchtitan's console log."""
    newest = next((v for line in reversed(list(log_lines(text))) if (v := line_values(line)) is not None), None)
    return translate_record(newest, context)


def translate_record(record: Mapping[str, Any] | None, context: Mapping[str, Any]) -> Translation:
    """Map the values of one training line (:func:`line_values`)."""
    fields = Fields.from_log(
        record, context, "no complete torchtitan training line ('step: N  loss: ...  mfu: M%') in the text"
    )
    fields.apply(TEXT_RULES)
    scaled_by_world(fields, first_present(fields, ("tps", "wps")) or "tps", "tokens_per_sec", "tokens/s")
    return fields.finish("torchtitan")


def line_values(line: str) -> dict[str, Any] | None:
    """The values of one complete training line (``step: N  loss: ...  mfu: M%``), or None: not one, a
    validation line, or a line cut off before its last field."""
    if "step:" not in line or "loss:" not in line:
        return None
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    line = line.rstrip()
    step = _STEP.search(line)
    if step is None or "validate step" in line or not line.endswith("%"):
        return None
    values: dict[str, Any] = {"step": int(step.group(1))}
    for key, number, _percent in _PAIR.findall(line):
        values[key] = float(number.replace(",", ""))
    return values


ADAPTER = Adapter(
    "torchtitan", translate, translate_text, description="torchtitan MetricsProcessor dicts and console lines"
)
normalize = ADAPTER.normalize
