"""Per-rank step times gathered to rank 0 with ``torch.distributed``.

Every ``every`` steps each rank all-gathers one small float64 tensor of its sums since the last
gather (steps, busy time, data/sync/all-reduce waits, tokens, GPU index); rank 0 turns the rows
into :class:`~trainpulse_otel.samples.RankSample` entries for its next report (:func:`rank_samples`),
so one sender (or one in-process pipeline) sees every rank and can find a straggler.

The gather is a collective on the training thread, at the same step on every rank: it holds
whenever every rank calls ``monitor.step()`` equally often, as DDP requires anyway. Hostnames are
gathered once (``all_gather_object``). With NCCL the tensor lives on the rank's current CUDA
device, and the one ``tolist()`` per gather synchronises it. Each rank's ``step_time_ms`` is its
own busy time (its ``step()`` block minus its ``phase("sync")`` wait for slower peers); the
per-rank fields: docs/instrumentation.md ("Distributed").
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from ...samples import RankSample
from .aggregate import ALL_REDUCE, DATA, SYNC

log = logging.getLogger(__name__)

DEFAULT_GATHER_EVERY = 10
# Row layout of the gathered tensor.
_STEPS, _BUSY, _DATA, _SYNC, _ALL_REDUCE, _TOKENS, _TOKEN_STEPS, _GPU = range(8)
_WIDTH = 8


@dataclass(frozen=True)
class World:
    """Where this process sits in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    dist: Any = None  # torch.distributed when initialised with world_size > 1

    @property
    def is_reporter(self) -> bool:
        """Rank 0 reports for the job."""
        return self.rank == 0


def detect_world(environ: dict[str, str] | None = None) -> World:
    """Rank, world size and local rank from ``torch.distributed`` when initialised, else torchrun's env.

    torch is not imported here: if the training script has not imported
    ``torch.distributed``, there is no process group to ask.
    """
    env = os.environ if environ is None else environ
    local_rank = _int(env.get("LOCAL_RANK"), 0)
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        rank, size = dist.get_rank(), dist.get_world_size()
        return World(rank, size, _int(env.get("LOCAL_RANK"), rank), dist if size > 1 else None)
    return World(_int(env.get("RANK"), 0), _int(env.get("WORLD_SIZE"), 1), local_rank)


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


class RankGatherer:
    """Accumulates this rank's steps and all-gathers them every ``every`` steps."""

    def __init__(self, world: World, every: int = DEFAULT_GATHER_EVERY, gpu_index: int | None = None) -> None:
        if world.dist is None:
            raise ValueError("RankGatherer needs an initialised torch.distributed process group")
        self.world = world
        self.every = max(1, every)
        self.gathers = 0
        self.gather_s = 0.0
        self.latest: tuple[RankSample, ...] = ()
        self._gpu_index = world.local_rank if gpu_index is None else gpu_index
        self._sums = [0.0] * _WIDTH
        self._tokens: list[Any] = []
        self._hostnames: list[str] | None = None
        self._broken = False

    def on_step(self, step_s: float, phases: Sequence[float], tokens: Any) -> None:
        """Add one step; gather when ``every`` steps have accumulated. Training thread only."""
        s = self._sums
        s[_STEPS] += 1
        s[_BUSY] += step_s - phases[SYNC]
        s[_DATA] += phases[DATA]
        s[_SYNC] += phases[SYNC]
        s[_ALL_REDUCE] += phases[ALL_REDUCE]
        if tokens is not None:  # kept as given: a tensor is read at the gather, not every step
            self._tokens.append(tokens)
            s[_TOKEN_STEPS] += step_s - phases[SYNC]
        if s[_STEPS] >= self.every and not self._broken:
            self._gather()

    def _gather(self) -> None:
        start = perf_counter()
        try:
            self._sums[_TOKENS] = sum(float(t) for t in self._tokens)
            rows = self._all_gather(self._sums)
            if self._hostnames is None:
                self._hostnames = self._all_gather_hostnames()
        except Exception:  # a broken process group must not end the job from here
            self._broken = True
            log.warning("gathering per-rank step times failed; per-rank reports stop", exc_info=True)
            return
        finally:
            self._sums, self._tokens = [0.0] * _WIDTH, []
        self.gathers += 1
        self.gather_s += perf_counter() - start
        if self.world.is_reporter:
            self.latest = rank_samples(rows, self._hostnames)

    def _all_gather(self, sums: list[float]) -> list[list[float]]:
        import torch

        dist = self.world.dist
        sums[_GPU] = float(self._gpu_index)
        device = torch.device("cpu")
        if "nccl" in str(dist.get_backend()).lower():
            device = torch.device("cuda", torch.cuda.current_device())
        mine = torch.tensor(sums, dtype=torch.float64, device=device)
        rows = [torch.empty_like(mine) for _ in range(self.world.world_size)]
        dist.all_gather(rows, mine)
        return torch.stack(rows).tolist()

    def _all_gather_hostnames(self) -> list[str]:
        names: list[Any] = [None] * self.world.world_size
        self.world.dist.all_gather_object(names, socket.gethostname())
        return [str(n) for n in names]


def rank_samples(rows: Sequence[Sequence[float]], hostnames: Sequence[str] | None = None) -> tuple[RankSample, ...]:
    """One RankSample per gathered row (row i is rank i): means per step, in ms."""
    out = []
    for rank, row in enumerate(rows):
        steps = row[_STEPS]
        if steps <= 0:
            continue
        per_step_ms = 1000.0 / steps
        busy_s = max(0.0, row[_BUSY])
        token_s = row[_TOKEN_STEPS]
        out.append(
            RankSample(
                rank=rank,
                gpu_index=int(row[_GPU]) if row[_GPU] >= 0 else None,
                hostname=hostnames[rank] if hostnames else None,
                step_time_ms=busy_s * per_step_ms,
                tokens_per_sec=row[_TOKENS] / token_s if token_s > 0 else None,
                data_wait_ms=max(0.0, row[_DATA]) * per_step_ms,
                sync_wait_ms=max(0.0, row[_SYNC]) * per_step_ms,
                all_reduce_wait_ms=max(0.0, row[_ALL_REDUCE]) * per_step_ms,
            )
        )
    return tuple(out)
