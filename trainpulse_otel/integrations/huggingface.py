"""TrainPulse in a Hugging Face ``Trainer``: ``callbacks=[TrainPulseCallback(endpoint=…)]``.

What each field means here (docs/instrumentation.md says the same for users):

- step time — ``on_step_begin`` to ``on_step_end``: every micro-batch's forward
  and backward, gradient clipping and the optimizer step;
- data wait — from the end of the previous step's bookkeeping (its
  ``on_step_end``, ``on_log``, ``on_evaluate`` or ``on_save``) to
  ``on_step_begin``: the Trainer fetching the step's batches;
- checkpoint — from the previous callback to ``on_save``: the save itself;
- tokens, samples, sequence lengths — from the ``input_ids`` and
  ``attention_mask`` the model's forward receives during the step (a forward
  pre-hook; evaluation forwards are not counted);
- loss, grad norm, learning rate from ``on_log``; world size, batch sizes,
  gradient accumulation and precision from the ``TrainingArguments``.

Every rank runs a monitor; only rank 0 sends or diagnoses. Under DDP the wait
for a slow rank is spent inside the backward all-reduce, so each rank's step
time includes it; ``time_sync=True`` measures it as sync wait instead
(:func:`~trainpulse_otel.integrations.torch.sync_point`).
"""

from __future__ import annotations

import logging
from time import perf_counter
from typing import Any

from transformers import TrainerCallback

from .monitor import TrainingMonitor
from .torch import batch_stats, sum_stats, sync_point

log = logging.getLogger(__name__)

#: ``on_log`` keys → training fields.
LOG_FIELDS = {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "learning_rate"}


class TrainPulseCallback(TrainerCallback):
    """A ``transformers.TrainerCallback`` that feeds a :class:`TrainingMonitor`."""

    def __init__(self, time_sync: bool = False, **monitor_kwargs: Any) -> None:
        self.monitor_kwargs = {"framework": "huggingface", **monitor_kwargs}
        self.time_sync = time_sync
        self.monitor: TrainingMonitor | None = None
        self._hooks: list[Any] = []
        self._in_step = False
        self._mark = perf_counter()
        self._stats: list[dict[str, Any]] = []  # of this step's training forwards

    # ---------------------------------------------------------------- set-up

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        kwargs_for_monitor = {**_job_fields(args), **self.monitor_kwargs}
        if model is not None and "flops_per_token" not in kwargs_for_monitor:
            kwargs_for_monitor.setdefault("model", model)
        self.monitor = TrainingMonitor(**kwargs_for_monitor)
        if model is not None:
            self._hooks.append(model.register_forward_pre_hook(self._on_forward, with_kwargs=True))
            if self.time_sync:
                self._hooks.append(model.register_forward_hook(self._after_forward))
        self._mark = perf_counter()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        if self.monitor is not None:
            self.monitor.close()

    # ----------------------------------------------------------------- steps

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is None:
            return
        self.monitor.add_phase_time("data", perf_counter() - self._mark)
        self._stats = []
        self._in_step = True
        self.monitor.begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is None or not self._in_step:
            return
        self._in_step = False
        self.monitor.end_step(**sum_stats(self._stats))
        self._mark = perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if self.monitor is None or not logs:
            return
        fields = {field: logs[key] for key, field in LOG_FIELDS.items() if isinstance(logs.get(key), (int, float))}
        if fields:
            self.monitor.record(global_step=state.global_step, **fields)
        self._mark = perf_counter()

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._mark = perf_counter()  # evaluation is neither data wait nor a step

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None:
            self.monitor.add_phase_time("checkpoint", perf_counter() - self._mark)
        self._mark = perf_counter()

    # ----------------------------------------------------------------- hooks

    def _on_forward(self, module: Any, args: tuple, kwargs: dict) -> None:
        """Count the tokens of each training forward inside a step (no device sync)."""
        if not self._in_step or not module.training:
            return
        stats = batch_stats(kwargs if "input_ids" in kwargs else args)
        if stats:
            self._stats.append(stats)

    def _after_forward(self, module: Any, args: tuple, output: Any) -> None:
        if self._in_step and module.training and self.monitor is not None:
            sync_point(self.monitor)


def _job_fields(args: Any) -> dict[str, Any]:
    """World size, batch sizes, accumulation and precision from ``TrainingArguments``."""
    world = max(1, int(getattr(args, "world_size", 1) or 1))
    micro = int(getattr(args, "per_device_train_batch_size", 0) or 0)
    accumulation = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
    fields: dict[str, Any] = {"world_size": world, "gradient_accumulation_steps": accumulation}
    if micro:
        fields.update(micro_batch_size=micro, global_batch_size=micro * accumulation * world)
    if getattr(args, "bf16", False):
        fields["precision"] = "bf16"
    elif getattr(args, "fp16", False):
        fields["precision"] = "fp16"
    elif getattr(args, "tf32", False):
        fields["precision"] = "tf32"
    return fields
