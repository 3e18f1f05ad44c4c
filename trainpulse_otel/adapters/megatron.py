"""The ``megatron`` adapter: TensorBoard/W&B scalars, native OTel names, console log.

Dict payloads carry the scalar names ``training_log`` writes to TensorBoard and
W&B: ``iteration-time`` (**seconds** per iteration), ``throughput`` (TFLOP/s per
GPU), ``learning-rate``, ``batch-size``, ``world-size``, ``grad-norm``, the loss
keys (``lm loss``, ...), ``loss-scale``, ``num-zeros``, ``params-norm``,
``mem-*-bytes``, and the timers as ``<timer>-time`` — the largest rank's time,
averaged per iteration, in **seconds** (``Timers.write`` divides only by the log
interval; the console's timers are milliseconds). Megatron's own OpenTelemetry
metric names (``megatron.training.step_duration_ms``, ``.loss``,
``.throughput_tflops``, ``.tokens_per_sec``, ``.grad_norm``, ``.learning_rate``)
are understood as well. The step is ``step``/``iteration`` beside the dict.

Log text (``text/plain``) is read by :mod:`.megatron_text`. Timers map as
``batch-generator`` -> data_wait_ms (``--timing-log-level 2``), ``all-grads-sync``
-> all_reduce_wait_ms (level 1), ``save-checkpoint`` -> checkpoint_ms (always),
the pipeline's receive timers -> sync_wait_ms (level 2), and with
``--timing-log-option all`` each rank's ``forward-backward`` (less its
``all-grads-sync``) -> that rank's step time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .base import Adapter, Fields, Rule, Translation, converted, numeric_out, scaled_by_world, set_from_first
from .megatron_text import PER_RANK_KEY, TIMER_PREFIX, newest_record

#: Megatron's ``--seq-length`` (or the contract's name), for deriving tokens/s.
SEQUENCE_RULES: tuple[Rule, ...] = (Rule("seq_length", "max_seq_len"), Rule("max_seq_len", "max_seq_len"))
SCALAR_RULES: tuple[Rule, ...] = (
    Rule("iteration-time", "step_time_ms", 1000.0),
    Rule("throughput", "tflops"),
    Rule("learning-rate", "learning_rate"),
    Rule("batch-size", "global_batch_size"),
    Rule("world-size", "world_size"),
    Rule("grad-norm", "grad_norm"),
    Rule("lm loss", "loss"),
    Rule("megatron.training.step_duration_ms", "step_time_ms"),
    Rule("megatron.training.loss", "loss"),
    Rule("megatron.training.throughput_tflops", "tflops"),
    Rule("megatron.training.tokens_per_sec", "tokens_per_sec"),
    Rule("megatron.training.grad_norm", "grad_norm"),
    Rule("megatron.training.learning_rate", "learning_rate"),
    Rule("skipped_iters", "skipped_steps"),
    Rule("megatron.training.skipped_iters", "skipped_steps"),
    Rule("loss-scale", "loss_scale"),
    *SEQUENCE_RULES,
)
LOG_RULES: tuple[Rule, ...] = (
    Rule("elapsed time per iteration (ms)", "step_time_ms"),
    Rule("elapsed time per iteration (s)", "step_time_ms", 1000.0),
    Rule("throughput per GPU (TFLOP/s/GPU)", "tflops"),
    Rule("TFLOPs", "tflops"),
    Rule("samples per second", "samples_per_sec"),
    Rule("learning rate", "learning_rate"),
    Rule("global batch size", "global_batch_size"),
    Rule("lm loss", "loss"),
    Rule("grad norm", "grad_norm"),
    Rule("actual seqlen", "max_seq_len"),
    Rule("number of skipped iterations", "skipped_steps"),
    Rule("loss scale", "loss_scale"),
    # GPT-NeoX
    Rule("lm_loss", "loss"),
    Rule("approx flops per GPU", "tflops"),
    Rule("samples/sec", "samples_per_sec"),
    # ALCF's Megatron-DeepSpeed (``key=value``); the contract's own names (learning_rate, ...) need no rule
    Rule("elapsed_time_per_iteration_ms", "step_time_ms"),
    Rule("[LM]TFLOPs", "tflops"),
    Rule("samples_per_second", "samples_per_sec"),
    Rule("actual_seqlen", "max_seq_len"),
    Rule("number_of_skipped_iterations", "skipped_steps"),
    *SEQUENCE_RULES,
)
#: Megatron-DeepSpeed's per-GPU token rate, as its releases spell it.
TGS_KEYS = ("tokens per gpu per second (tgs)", "tokens per gpu per second(tgs)", "tokens_per_gpu_per_second_tgs")
#: Megatron timer -> contract field (the largest rank's time).
TIMER_FIELDS: tuple[tuple[str, str], ...] = (
    ("batch-generator", "data_wait_ms"),
    ("batch generator", "data_wait_ms"),  # 2020 and GPT-NeoX
    ("all-grads-sync", "all_reduce_wait_ms"),
    ("backward-params-all-reduce", "all_reduce_wait_ms"),  # the same, before 2022
    ("backward-allreduce", "all_reduce_wait_ms"),  # GPT-NeoX
    ("allreduce", "all_reduce_wait_ms"),  # 2020
    ("save-checkpoint", "checkpoint_ms"),
    ("save-checkpoint-non-persistent", "checkpoint_ms"),
)
#: Pipeline-parallel receive timers: a stage waiting for its neighbour.
P2P_WAIT_TIMERS = (
    "forward-recv",
    "backward-recv",
    "forward-send-forward-recv",
    "forward-send-backward-recv",
    "backward-send-forward-recv",
    "backward-send-backward-recv",
    "forward-backward-send-forward-backward-recv",
)


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map TensorBoard/W&B scalars or Megatron's OTel metric names."""
    fields = Fields.from_payload(payload)
    fields.apply(SCALAR_RULES)
    _other_loss(fields)
    _timers(fields, lambda name: f"{name}-time", 1000.0)
    _derived_rates(fields)
    return fields.finish("megatron")


def translate_text(text: str, context: Mapping[str, Any]) -> Translation:
    """Map the newest complete iteration line of a Megatron log and the timers after it."""
    return translate_record(newest_record(text), context)


def translate_record(record: Mapping[str, Any] | None, context: Mapping[str, Any]) -> Translation:
    """Map one iteration line's record (:mod:`.megatron_text`) and the timers after it."""
    fields = Fields.from_log(
        record, context, "no complete Megatron iteration line ('iteration N/ M | ... |') in the text"
    )
    fields.apply(LOG_RULES)
    _other_loss(fields)
    _timers(fields, lambda name: TIMER_PREFIX + name, 1.0)
    _rank_step_times(fields)
    for key in TGS_KEYS:
        scaled_by_world(fields, key, "tokens_per_sec", "tokens/s")
    _derived_rates(fields)
    return fields.finish("megatron")


def _other_loss(fields: Fields) -> None:
    """Models without ``lm loss`` log their own loss keys (``<name> loss``; ``total loss`` before 2021; BigScience's
    2021 ``lm-loss``)."""
    set_from_first(fields, lambda k: k.endswith((" loss", "-loss")) and " vs " not in k, "loss")


def _timers(fields: Fields, key_of: Callable[[str], str], to_ms: float) -> None:
    for name, field_name in TIMER_FIELDS:
        if fields.has(key_of(name)):
            fields.set(field_name, fields.number(key_of(name)) * to_ms, key_of(name))  # type: ignore[operator]
    waits = [key_of(name) for name in P2P_WAIT_TIMERS if fields.has(key_of(name))]
    if waits and fields.wants("sync_wait_ms"):
        fields.set("sync_wait_ms", sum(fields.number(k) for k in waits) * to_ms, waits[0])  # type: ignore[misc]
        fields.note("sync_wait_ms = the pipeline receive timers (" + ", ".join(waits) + "), largest rank")


def _rank_step_times(fields: Fields) -> None:
    """``--timing-log-option all``: one ``ranks`` entry per rank from its own timers."""
    per_rank: Mapping[str, Mapping[int, float]] = fields.raw(PER_RANK_KEY) or {}
    forward_backward = per_rank.get("forward-backward", {})
    ranks = sorted(set().union(*(timers.keys() for timers in per_rank.values()))) if per_rank else []
    entries = [_rank_entry(rank, per_rank) for rank in ranks]
    if entries:
        fields.set("ranks", entries, PER_RANK_KEY)
        if forward_backward:
            fields.note("ranks[].step_time_ms = the rank's forward-backward minus its all-grads-sync")


def _rank_entry(rank: int, per_rank: Mapping[str, Mapping[int, float]]) -> dict[str, Any]:
    entry: dict[str, Any] = {"rank": rank}
    sync = per_rank.get("all-grads-sync", {}).get(rank)
    forward_backward = per_rank.get("forward-backward", {}).get(rank)
    if forward_backward is not None:
        entry["step_time_ms"] = max(forward_backward - (sync or 0.0), 0.0)
    if sync is not None:
        entry["all_reduce_wait_ms"] = sync
    if (wait := per_rank.get("batch-generator", {}).get(rank)) is not None:
        entry["data_wait_ms"] = wait
    return entry


def _derived_rates(fields: Fields) -> None:
    """samples/s = global batch / step time; tokens/s = samples/s x sequence length."""
    batch, step_ms = numeric_out(fields, "global_batch_size"), numeric_out(fields, "step_time_ms")
    if fields.wants("samples_per_sec") and batch and step_ms:
        fields.set("samples_per_sec", converted(batch * 1000.0 / step_ms), fields.mapped["global_batch_size"])
        fields.note("samples_per_sec = global batch size / step time")
    samples, seq_len = numeric_out(fields, "samples_per_sec"), numeric_out(fields, "max_seq_len")
    if fields.wants("tokens_per_sec") and samples and seq_len:
        fields.set("tokens_per_sec", converted(samples * seq_len), fields.mapped["max_seq_len"])
        fields.note(f"tokens_per_sec = samples_per_sec x sequence length {seq_len:g} (the padded length)")


ADAPTER = Adapter(
    "megatron", translate, translate_text, description="Megatron-LM TensorBoard scalars, OTel names and logs"
)
normalize = ADAPTER.normalize
parse_text = ADAPTER.parse_text
