"""TrainPulse in a Lightning ``Trainer``: ``Trainer(callbacks=[TrainPulseCallback(endpoint=…)])``.

What each field means here:

- step — one optimizer step: from the ``on_train_batch_start`` of its first
  micro-batch to the ``on_train_batch_end`` after which ``trainer.global_step``
  advanced (so ``accumulate_grad_batches`` micro-batches make one step);
- data wait — from the previous ``on_train_batch_end`` to the next
  ``on_train_batch_start``: Lightning fetching the batch (plus, on the first
  batch of an epoch, starting the loader's workers);
- checkpoint — from ``on_save_checkpoint`` (called just before the file is
  written) to the next hook: the write, plus fetching the next batch;
- tokens, samples, sequence lengths — from the batch
  (:func:`~trainpulse_otel.integrations.torch.batch_stats`: ``input_ids`` and
  ``attention_mask``, or a token tensor), or from ``batch_stats=`` if given;
- loss — from ``outputs`` of ``training_step`` when it is a tensor or has a
  ``loss``; world size, accumulation and precision from the trainer.

Every rank runs a monitor; only global rank 0 sends or diagnoses.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone ``pytorch_lightning`` package
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from .monitor import TrainingMonitor
from .torch import batch_stats as default_batch_stats
from .torch import sum_stats

BatchStats = Callable[[Any], dict]


class TrainPulseCallback(Callback):
    """A Lightning ``Callback`` that feeds a :class:`TrainingMonitor`."""

    def __init__(self, batch_stats: BatchStats | None = None, **monitor_kwargs: Any) -> None:
        self.monitor_kwargs = {"framework": "lightning", **monitor_kwargs}
        self.batch_stats = batch_stats or default_batch_stats
        self.monitor: TrainingMonitor | None = None
        self._mark = perf_counter()
        self._mark_phase = "data"
        self._step_at_start = -1
        self._stats: list[dict] = []

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        kwargs = {**_job_fields(trainer), **self.monitor_kwargs}
        if "flops_per_token" not in kwargs:
            kwargs.setdefault("model", pl_module)
        self.monitor = TrainingMonitor(**kwargs)
        self._mark, self._mark_phase = perf_counter(), "data"

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.monitor is not None:
            self.monitor.close()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is None:
            return
        self._close_gap()
        if not self._stats and self._step_at_start < 0:
            self._step_at_start = trainer.global_step
            self.monitor.begin_step()
        self._stats.append(self.batch_stats(batch))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is None or self._step_at_start < 0:
            return
        if trainer.global_step != self._step_at_start:
            self.monitor.end_step(**sum_stats(self._stats))
            self._stats, self._step_at_start = [], -1
            loss = _loss(outputs)
            if loss is not None:
                self.monitor.record(loss=loss, global_step=trainer.global_step)
        self._mark, self._mark_phase = perf_counter(), "data"

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict) -> None:
        self._close_gap()
        self._mark_phase = "checkpoint"

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._close_gap()
        self._mark_phase = ""  # validation is neither data wait nor a step

    def _close_gap(self) -> None:
        now = perf_counter()
        if self.monitor is not None and self._mark_phase:
            self.monitor.add_phase_time(self._mark_phase, now - self._mark)
        self._mark, self._mark_phase = now, "data"


def _loss(outputs: Any) -> float | None:
    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    if hasattr(loss, "detach"):
        return loss.detach()  # a tensor: read off the training thread
    return loss if isinstance(loss, (int, float)) else None


def _job_fields(trainer: Any) -> dict[str, Any]:
    """World size, gradient accumulation and precision from the trainer."""
    fields: dict[str, Any] = {
        "world_size": max(1, int(getattr(trainer, "world_size", 1) or 1)),
        "gradient_accumulation_steps": max(1, int(getattr(trainer, "accumulate_grad_batches", 1) or 1)),
    }
    precision = str(getattr(trainer, "precision", "") or "")
    if precision:
        fields["precision"] = precision
    return fields
