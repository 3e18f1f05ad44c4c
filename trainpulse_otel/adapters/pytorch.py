"""The ``pytorch`` adapter: what plain PyTorch training loops already produce.

Two real vocabularies besides the contract's own names:

- ``DistributedDataParallel._get_ddp_logging_data()`` (c10d ``Logger``): one
  rank's ``rank``, ``world_size``, ``iteration`` and the reducer's averages
  ``avg_forward_compute_time``, ``avg_backward_compute_time``,
  ``avg_backward_comm_time``, ``avg_backward_compute_comm_overlap_time`` — in
  **nanoseconds**. The exposed (not overlapped) gradient communication,
  comm - overlap, is the rank's all-reduce wait; forward + backward compute is
  its own step time. They become one ``ranks`` entry.
- the ``MetricLogger`` meters of the torchvision reference scripts: ``time``
  and ``data`` (seconds per iteration and seconds waiting for the loader),
  ``lr``, ``loss`` and ``img/s`` (one process's samples per second, scaled by
  ``world_size`` to the job).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Adapter, Fields, Rule, Translation, scaled_by_world

NS_PER_MS = 1e6
RULES: tuple[Rule, ...] = (
    Rule("time", "step_time_ms", 1000.0),
    Rule("data", "data_wait_ms", 1000.0),
    Rule("lr", "learning_rate"),
)
DDP_TIMES = (
    "avg_forward_compute_time",
    "avg_backward_compute_time",
    "avg_backward_comm_time",
    "avg_backward_compute_comm_overlap_time",
)


def translate(payload: Mapping[str, Any]) -> Translation:
    """Map DDP logging data and/or torchvision MetricLogger meters."""
    fields = Fields.from_payload(payload)
    fields.apply(RULES)
    scaled_by_world(fields, "img/s", "samples_per_sec", "samples/s")
    _ddp_rank(fields)
    return fields.finish("pytorch")


def _ddp_rank(fields: Fields) -> None:
    """One ``ranks`` entry from DDP's reducer timings (ns -> ms)."""
    if not fields.has("rank") or not any(fields.has(k) for k in DDP_TIMES):
        return
    forward, backward, comm, overlap = (fields.number(k) for k in DDP_TIMES)
    entry: dict[str, Any] = {"rank": fields.raw("rank")}
    if forward is not None and backward is not None:
        entry["step_time_ms"] = (forward + backward) / NS_PER_MS
    if comm is not None:
        entry["all_reduce_wait_ms"] = max(comm - (overlap or 0.0), 0.0) / NS_PER_MS
    fields.set("ranks", [entry], "rank")
    fields.note(
        "ranks[].step_time_ms = (avg_forward_compute_time + avg_backward_compute_time) / 1e6; "
        "all_reduce_wait_ms = (avg_backward_comm_time - overlap) / 1e6 (DDP reports ns)"
    )
    if fields.has("iteration"):
        fields.set("global_step", fields.raw("iteration"), "iteration")


ADAPTER = Adapter("pytorch", translate, description="DDP logging data and torchvision MetricLogger meters")
normalize = ADAPTER.normalize
