"""DDP's gradient all-reduce marked as the heartbeat's ``all_reduce`` phase, with no call in the loop.

``TrainingMonitor(model=ddp_model)`` registers :meth:`AllReduceMarker.hook` as the model's DDP
communication hook. It does what DDP does without a hook (torch's ``allreduce_hook``: divide the
bucket by the group's size, all-reduce it asynchronously, hand DDP the future) and, around it,
sets the recorder's current phase to ``all_reduce`` when the first bucket of a backward pass is
launched and back to what it was when the last launched bucket completes (a ``then`` callback,
on the process group's thread; NCCL's CUDA-aware futures complete once the collective is
enqueued, so there the mark spans the launches only). Only the heartbeat's phase changes: no
time is added to ``all_reduce_wait_ms`` (the buckets overlap the backward pass). A model that
is no DDP model, or already has a hook, is left alone (logged once). What it covers, FSDP and
what no hook covers: docs/instrumentation.md ("Phases without manual calls").
"""

from __future__ import annotations

import logging
import sys
import threading
from time import perf_counter
from typing import Any

from .recorder import StepRecorder

log = logging.getLogger(__name__)

ALL_REDUCE = "all_reduce"


class AllReduceMarker:
    """Counts the buckets in flight; the first launch marks ``all_reduce``, the last completion unmarks it.

    The launch runs on the thread that runs the backward pass, the completion on the process group's;
    a lock (two integer updates under it) keeps the count and the phase they set consistent.
    """

    def __init__(self, recorder: StepRecorder, process_group: Any) -> None:
        self._recorder = recorder
        self._group = process_group
        self._lock = threading.Lock()
        self._outstanding = 0
        self._before: tuple[str, float] | None = None
        #: Buckets all-reduced through the hook (for tests and stats).
        self.buckets = 0

    def hook(self, state, bucket):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - DDP checks the annotations
        """The DDP communication hook: torch's ``allreduce_hook``, with the phase marked around it (unannotated:
        DDP refuses any annotation but ``dist.GradBucket`` and ``Future[Tensor]``, which would import torch here)."""
        import torch.distributed as dist

        group = state if state is not None else dist.group.WORLD
        tensor = bucket.buffer()
        tensor.div_(group.size())
        self.launched()
        try:
            future = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        except BaseException:
            self.completed()
            raise
        return future.then(self._done)

    def _done(self, future: Any) -> Any:
        self.completed()
        return future.value()[0]  # raises the collective's error into DDP, as allreduce_hook does

    def launched(self) -> None:
        """A bucket's all-reduce starts: the first in flight marks the phase."""
        recorder = self._recorder
        with self._lock:
            if self._outstanding == 0:
                self._before = recorder.now
                if recorder.now[0] != ALL_REDUCE:
                    recorder.now = (ALL_REDUCE, perf_counter())
            self._outstanding += 1

    def completed(self) -> None:
        """A bucket's all-reduce ended (or failed): the last in flight puts the phase back as it was."""
        recorder = self._recorder
        with self._lock:
            self._outstanding -= 1
            self.buckets += 1
            if self._outstanding == 0 and self._before is not None:
                if recorder.now[0] == ALL_REDUCE:  # the loop has not moved on in between
                    recorder.now = self._before
                self._before = None

    @property
    def in_flight(self) -> int:
        """Buckets launched and not yet completed."""
        return self._outstanding


def ddp_all_reduce_marked(model: Any, recorder: StepRecorder) -> AllReduceMarker | None:
    """Register the marker as ``model``'s DDP communication hook; None (logged) when it cannot be."""
    ddp = _ddp_class()
    if model is None or ddp is None or not isinstance(model, ddp):
        log.debug("model= is no DistributedDataParallel model: its all-reduce is not marked as a phase")
        return None
    if getattr(model, "_use_python_reducer", False):  # compiled autograd's reducer: hooks get (grad, param)
        log.info("the DDP model uses the Python reducer (compiled autograd): its all-reduce is not marked")
        return None
    if getattr(model, "_comm_hooks", None):
        log.info(
            "the DDP model already has a communication hook: TrainPulse does not mark its all-reduce "
            "(wrap your hook's collective in monitor.phase('all_reduce') to have it in the heartbeats)"
        )
        return None
    marker = AllReduceMarker(recorder, model.process_group)
    try:
        model.register_comm_hook(model.process_group, marker.hook)
    except (RuntimeError, AssertionError, ValueError) as exc:  # a built-in hook, or a model already run
        log.info("cannot register TrainPulse's DDP communication hook (%s): its all-reduce is not marked", exc)
        return None
    return marker


def _ddp_class() -> type | None:
    """torch's DistributedDataParallel when the training script has imported it (torch is not imported here)."""
    parallel = sys.modules.get("torch.nn.parallel")
    return getattr(parallel, "DistributedDataParallel", None) if parallel is not None else None
