"""The ``huggingface`` adapter: ``transformers.Trainer`` log dicts.

What the Trainer emits (transformers ``trainer.py`` / ``trainer_utils.speed_metrics``):

- every ``logging_steps``, ``on_log(logs)`` with ``loss`` (mean since the last log),
  ``grad_norm`` (before clipping; absent when ``max_grad_norm`` is falsy),
  ``learning_rate``, ``epoch``; with ``include_num_input_tokens_seen`` also
  ``num_input_tokens_seen``, ``train_runtime`` and ``train_tokens_per_second``
  (tokens gathered from every process over the time since training started:
  a whole-job running average);
- at the end of ``train()``: ``train_runtime``, ``train_samples_per_second``,
  ``train_steps_per_second``, ``total_flos`` (summed over processes),
  ``train_loss``, ``epoch`` and, with ``include_tokens_per_second``,
  ``train_tokens_per_second`` — which there counts one device's tokens;
- evaluation metrics (``eval_loss``, ``eval_runtime``, ...) on the same channel.

The step number is not in ``logs`` (the Trainer keeps it in ``state.global_step``):
send it beside the dict as ``{"logs": {...}, "step": N}`` or as a top-level
``step``/``global_step``. A ``trainer_state.json`` body (with ``log_history``)
is read from its newest training entry, which carries its own ``step``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Adapter, Fields, Rule, Translation, note_not_training, scaled_by_world, world_size

TRAIN_RULES: tuple[Rule, ...] = (
    Rule("loss", "loss"),
    Rule("train_loss", "loss"),
    Rule("grad_norm", "grad_norm"),
    Rule("learning_rate", "learning_rate"),
    Rule("train_samples_per_second", "samples_per_sec"),
    Rule("per_device_train_batch_size", "micro_batch_size"),
)
#: Prefixes of evaluation/prediction metrics, which describe no training step.
NOT_TRAINING = ("eval_", "test_")
#: Keys only the end-of-train metrics carry.
END_OF_TRAIN = ("train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map one Trainer log (or the newest training entry of ``log_history``)."""
    fields = Fields.from_payload(_newest_training_log(payload))
    fields.apply(TRAIN_RULES)
    _step_time(fields)
    _tokens(fields)
    _tflops(fields)
    _global_batch(fields)
    note_not_training(fields, NOT_TRAINING)
    return fields.finish("huggingface")


def _newest_training_log(payload: Any) -> Any:
    """For a ``trainer_state.json`` body, its newest non-evaluation log entry plus the state's keys."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("log_history"), list):
        return payload
    context = {k: v for k, v in payload.items() if k != "log_history"}
    for entry in reversed(payload["log_history"]):
        if isinstance(entry, Mapping) and _is_training_log(entry):
            return {**context, **entry}
    return context


def _is_training_log(entry: Mapping[str, Any]) -> bool:
    return any(not k.startswith(NOT_TRAINING) and k not in ("epoch", "step") for k in entry)


def _step_time(fields: Fields) -> None:
    steps_per_sec = fields.number("train_steps_per_second")
    if steps_per_sec:
        fields.set("step_time_ms", 1000.0 / steps_per_sec, "train_steps_per_second")
        fields.note("step_time_ms = 1000 / train_steps_per_second: the average over the whole run")


def _tokens(fields: Fields) -> None:
    if not fields.has("train_tokens_per_second"):
        return
    if any(fields.data.get(k) is not None for k in END_OF_TRAIN):
        scaled_by_world(fields, "train_tokens_per_second", "tokens_per_sec", "the end-of-train token rate")
        return
    fields.set("tokens_per_sec", fields.number("train_tokens_per_second"), "train_tokens_per_second")
    fields.note("tokens_per_sec is HF's running average since training started, all processes")


def _tflops(fields: Fields) -> None:
    if not (fields.has("total_flos") and fields.has("train_runtime")):
        return
    total, runtime = fields.number("total_flos"), fields.number("train_runtime")
    world = world_size(fields)
    if world is None or not runtime:
        fields.note("total_flos gives tflops only with world_size and a non-zero train_runtime")
        return
    fields.set("tflops", total / runtime / world / 1e12, "total_flos")  # type: ignore[operator]
    fields.note("tflops = total_flos / train_runtime / world_size / 1e12 (HF's 6*N*tokens estimate)")


def _global_batch(fields: Fields) -> None:
    micro, accumulation = fields.out.get("micro_batch_size"), fields.data.get("gradient_accumulation_steps")
    world = fields.data.get("world_size")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (micro, accumulation, world)):
        fields.set("global_batch_size", micro * accumulation * world, "per_device_train_batch_size")


ADAPTER = Adapter("huggingface", translate, description="transformers Trainer on_log and end-of-train metrics")
normalize = ADAPTER.normalize
