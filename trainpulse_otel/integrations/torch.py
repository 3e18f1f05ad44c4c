"""Helpers for plain PyTorch loops: what a batch holds, and an explicit timed sync point.

    from trainpulse_otel.integrations.torch import batch_stats, sync_point

    for batch in monitor.wrap_dataloader(loader):
        with monitor.step(**batch_stats(batch)):
            loss = model(**batch).loss
            sync_point(monitor)          # optional: makes waiting for slow ranks visible
            loss.backward()
            optimizer.step()

Under DDP the gradient all-reduce overlaps the backward pass, and a fast rank
spends its wait for a slow one inside that all-reduce, where no callback can
see it. :func:`sync_point` puts one barrier before the backward pass and times
it as ``phase("sync")``: the wait moves there, so each rank's busy time (step
minus sync wait) is its own and a straggler stands out. It costs one barrier
per step (tens of microseconds with NCCL on one node).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


def batch_stats(batch: Any, pad_token_id: int | None = None) -> dict[str, Any]:
    """``tokens``, ``samples``, ``seq_lens`` and ``padded_len`` of a token batch, for ``monitor.step()``.

    A mapping with ``input_ids`` (samples × padded length) and optionally
    ``attention_mask``, a 2-D tensor of token ids, or a tuple/list whose
    first element is one. Real lengths come from the attention mask, else
    from ``!= pad_token_id``, else every position counts. Lengths and token
    counts stay tensors (no device sync here); the monitor reads them off the
    training thread. Anything else gives ``{}``.
    """
    ids, mask = _ids_and_mask(batch)
    if ids is None or getattr(ids, "dim", lambda: 0)() < 2:
        return {}
    samples, padded_len = int(ids.shape[0]), int(ids.shape[-1])
    if mask is None and pad_token_id is not None:
        mask = ids != pad_token_id
    if mask is None:
        return {"tokens": samples * padded_len, "samples": samples, "padded_len": padded_len}
    seq_lens = mask.sum(dim=-1)
    return {"tokens": seq_lens.sum(), "samples": samples, "seq_lens": seq_lens, "padded_len": padded_len}


def sum_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Micro-batch :func:`batch_stats` added up into one optimizer step's (no device sync)."""
    out: dict[str, Any] = {}
    tokens = [p["tokens"] for p in parts if "tokens" in p]
    samples = [p["samples"] for p in parts if "samples" in p]
    lengths = [p["seq_lens"] for p in parts if "seq_lens" in p]
    padded = [p["padded_len"] for p in parts if "padded_len" in p]
    if tokens:
        out["tokens"] = sum(tokens)
    if samples:
        out["samples"] = sum(samples)
    if lengths:
        out["seq_lens"] = lengths[0] if len(lengths) == 1 else _cat(lengths)
    if padded:
        out["padded_len"] = max(padded)
    return out


def _cat(tensors: list[Any]) -> Any:
    import torch

    return torch.cat([t.reshape(-1) for t in tensors])


def _ids_and_mask(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, Mapping):
        return batch.get("input_ids"), batch.get("attention_mask")
    if isinstance(batch, (list, tuple)) and batch:
        return _ids_and_mask(batch[0])
    if hasattr(batch, "shape") and hasattr(batch, "dim"):
        return batch, None
    return None, None


def sync_point(monitor: Any, group: Any = None) -> None:
    """A ``torch.distributed`` barrier timed as ``phase("sync")``; nothing without a process group."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    with monitor.phase("sync"):
        dist.barrier(group=group)
