"""One training step across the ranks, the checkpoint schedule, and the report the training loop sends.

GPU clocks set each rank's compute time; compute (after its data-loader wait)
sets its arrival at the all-reduce; the last arrival sets everyone's sync wait
and the step's wall time, and so tokens/s and MFU.

Per rank (rank i on local GPU i, ranks past the node's GPUs on ``node-001``…;
a node of a job across nodes reports only its own, under their global numbers,
:mod:`.placement`): ``step_time_ms`` is the rank's own busy time — compute and
its part of the all-reduce, NOT waiting for slower peers; ``sync_wait_ms`` is
that waiting plus the barrier's own cost, which every rank pays alike;
``all_reduce_wait_ms`` the all-reduce proper; ``data_wait_ms`` its loader wait;
``tokens_per_sec`` its share of the step's tokens over its own busy time (see
docs/simulation.md, "Per-rank fields").

For the job, ``step_time_ms`` is the step's wall time: the latest arrival over
ranks plus tokenizer wait, the all-reduce, fixed overheads, any pipeline bubble
and any checkpoint save; the job's waits are means over ranks, and
``tokens_per_sec`` counts real (non-padding) tokens over wall time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...samples import RankSample, TrainingSample
from .job import (
    BARRIER_OF_ALLREDUCE,
    DATA_WAIT_MS,
    OVERHEAD_MS,
    P_DATA_SPIKE,
    P_GC_PAUSE,
    RANK_JITTER,
    STEP_JITTER,
    TOKENIZER_MS,
    JobConfig,
    JobShape,
    expected_loss,
    learning_rate,
)
from .knobs import Knobs
from .physics import PEAK_BF16_FLOPS, memory_pressure

#: The simulated ranks' process ids: rank r is PID_BASE + r on its host.
PID_BASE = 41000


@dataclass(slots=True)
class Step:
    """One training step's timing, per rank (ms) and for the job."""

    compute: list[float]
    data: list[float]
    sync: list[float]
    allreduce: list[float]
    tokenizer_ms: float
    wall_ms: float  # without any checkpoint save


@dataclass(slots=True)
class Checkpointing:
    """The save schedule: train for ``every`` seconds, then block for a save."""

    trained_s: float = 0.0
    remaining_s: float = 0.0
    save_s: float = 0.0

    def saving(self, dt: float) -> bool:
        """Advance a save in progress; True while it still blocks training."""
        if self.remaining_s <= 0:
            return False
        self.remaining_s -= dt
        return self.remaining_s > 1e-9

    def finished_ms(self) -> float:
        """The length of a save that has just ended (0 if none), and reset for the next."""
        if self.save_s <= 0 or self.remaining_s > 1e-9:
            return 0.0
        done, self.save_s, self.remaining_s, self.trained_s = self.save_s, 0.0, 0.0, 0.0
        return done * 1000.0

    def due(self, dt: float, every_s: float) -> bool:
        """Count training time; True when a save is due."""
        self.trained_s += dt
        return self.trained_s >= every_s

    def start(self, save_s: float) -> None:
        """Begin a save that blocks training for ``save_s`` seconds."""
        self.remaining_s = self.save_s = save_s


class StepModel:
    """Times one step on every rank: compute, data, all-reduce, then who waits for whom."""

    def __init__(self, rng: random.Random, shape: JobShape, rank_speed: list[float]) -> None:
        self._rng = rng
        self._shape = shape
        self._rank_speed = rank_speed
        #: The last step's slowdown of each of the node's own ranks against one on a healthy GPU at full clock: its
        #: rank's ``rank_slowdown``, its clock, its allocator's retries (what another node's simulation carries).
        self.slowdowns: tuple[float, ...] = ()

    def time(self, k: Knobs, clocks: tuple[float, ...], elsewhere: Mapping[int, float] | None = None) -> Step:
        """This tick's step, with the GPUs at ``clocks`` (fractions of their maximum) and the ranks of
        ``elsewhere`` (internal ranks on another node's faulted GPUs) that many times slower."""
        rng, gauss, exp = self._rng, self._rng.gauss, math.exp
        compute = self._compute(k, clocks)
        for rank, slowdown in (elsewhere or {}).items():
            compute[rank] *= slowdown
        allreduce_ms = self._shape.allreduce_ms * k.allreduce_factor * exp(gauss(0.0, 0.03))
        data_common = DATA_WAIT_MS * exp(gauss(0.0, 0.25))
        if rng.random() < P_DATA_SPIKE:
            data_common += 150.0 + 250.0 * rng.random()  # a slow shard open on shared storage
        f = k.data_wait_frac
        starved_ms = f / (1 - f) * (sum(compute) / len(compute) + allreduce_ms + OVERHEAD_MS)
        data, allreduce, barrier = [], [], []
        for _ in compute:
            z = gauss(0.0, 1.0)
            data.append(data_common * exp(0.2 * z) + starved_ms * exp(0.05 * z))
            u = rng.random()
            allreduce.append(allreduce_ms * (0.99 + 0.02 * u))
            barrier.append(BARRIER_OF_ALLREDUCE * allreduce_ms * (0.85 + 0.3 * u))
        arrivals = [d + c for d, c in zip(data, compute, strict=True)]
        last = max(arrivals)
        sync = [last - a + b for a, b in zip(arrivals, barrier, strict=True)]
        f = k.tokenizer_frac
        tokenizer_ms = TOKENIZER_MS * exp(gauss(0.0, 0.3)) + f / (1 - f) * (last + allreduce_ms + OVERHEAD_MS)
        bubble = self._shape.bubble
        bubble_ms = max(compute) * bubble / (1 - bubble)
        wall = last + bubble_ms + tokenizer_ms + allreduce_ms + OVERHEAD_MS
        return Step(compute, data, sync, allreduce, tokenizer_ms, wall)

    def _compute(self, k: Knobs, clocks: tuple[float, ...]) -> list[float]:
        """Each rank's forward+backward+optimizer time (ms)."""
        rng, gauss, exp = self._rng, self._rng.gauss, math.exp
        base = self._shape.compute_ms / (k.flop_efficiency * k.kernel_density) * exp(gauss(0.0, STEP_JITTER))
        compute = [base * speed * exp(gauss(0.0, RANK_JITTER)) for speed in self._rank_speed]
        if k.imbalance_cv:  # data-dependent work: a different rank draws the heavy batch each step
            compute = [c * max(0.4, 1.0 + k.imbalance_cv * gauss(0.0, 1.0)) for c in compute]
        self.slowdowns = tuple(
            k.rank_slowdown[g] / clocks[g] * delay for g, delay in enumerate(self._allocator_delay(k))
        )
        for g, slowdown in enumerate(self.slowdowns):
            compute[g] *= slowdown
        if rng.random() < P_GC_PAUSE:  # a full Python GC on one rank
            compute[int(rng.random() * self._shape.ranks)] += 200.0 + 400.0 * rng.random()
        return compute

    def _allocator_delay(self, k: Knobs) -> list[float]:
        """Near-full GPU memory makes cudaMalloc retry (free the cache, synchronise): step jitter.

        Data-parallel ranks run the same graph on the same shapes, so their
        allocators fragment alike and retry on the same steps: one draw per tick.
        """
        pressure = [memory_pressure(frac) for frac in k.memory_frac]
        if not any(pressure):
            return [1.0] * self._shape.gpus
        rng = self._rng
        jitter, retry, cost = rng.gauss(0.0, 1.0), rng.random(), rng.uniform(0.1, 0.3)
        return [math.exp(0.04 * p * jitter) * (1.0 + cost if retry < 0.3 * p else 1.0) for p in pressure]


#: A harder batch now and then (about one step in 300): the loss is 2-6 % above the curve for one step —
#: healthy noise, not a spike. Chosen by a hash of the step, not a draw, so the other noise streams keep theirs.
HARD_BATCH_EVERY = 300


@dataclass(frozen=True, slots=True)
class LossState:
    """What the numerical faults do to the reported loss: a factor on it, or a diverged (NaN) model."""

    factor: float = 1.0
    diverged: bool = False


@dataclass(frozen=True, slots=True)
class RankNames:
    """How the report names the simulated ranks: each internal rank's global number and host, and the
    internal ranks the report carries (:mod:`.placement`: a node of a job across nodes reports its own)."""

    rank: list[int]
    host: list[str]
    reported: range


@dataclass(frozen=True, slots=True)
class Reporter:
    """Writes the training loop's report of each finished step, as the contract's :class:`TrainingSample`."""

    rng: random.Random
    job: JobConfig
    shape: JobShape
    hostname: str
    names: RankNames

    def report(
        self,
        ts: float,
        global_step: int,
        step: Step,
        checkpoint_ms: float,
        numerics: LossState = LossState(),
        stalled_ms: float = 0.0,
    ) -> TrainingSample:
        """The report at ``ts`` for the step that just finished (``checkpoint_ms``: a save it ended;
        ``stalled_ms``: how long it sat out a hung rank)."""
        job, shape, n = self.job, self.shape, self.shape.ranks
        avg_seq = self._avg_seq_len()
        tokens = shape.global_batch * avg_seq
        step_ms = step.wall_ms + checkpoint_ms + stalled_ms
        beat = self._heartbeat(global_step, "compute", ts)
        tokens_per_sec = tokens / (step_ms / 1000.0)
        achieved = shape.flops_per_token * tokens_per_sec / n
        rank_tokens = tokens / n
        names = self.names
        ranks = tuple(
            RankSample(
                rank=names.rank[r],
                gpu_index=r % shape.gpus,
                hostname=names.host[r],
                step_time_ms=round(step.compute[r] + step.allreduce[r], 3),
                tokens_per_sec=round(rank_tokens / ((step.compute[r] + step.allreduce[r]) / 1000.0), 1),
                data_wait_ms=round(step.data[r], 3),
                sync_wait_ms=round(step.sync[r], 3),
                all_reduce_wait_ms=round(step.allreduce[r], 3),
                **beat(r),
            )
            for r in names.reported
        )
        return TrainingSample(
            timestamp=ts,
            workload_kind=job.workload_kind,
            model_family=job.model_family,
            model_name=job.model_name,
            framework=job.framework,
            precision=job.precision,
            hostname=self.hostname,
            global_step=global_step,
            step_time_ms=round(step_ms, 3),
            tokens_per_sec=round(tokens_per_sec, 1),
            samples_per_sec=round(shape.global_batch / (step_ms / 1000.0), 3),
            mfu=round(min(1.0, achieved / PEAK_BF16_FLOPS), 4),
            tflops=round(achieved / 1e12, 2),
            avg_seq_len=round(avg_seq, 1),
            max_seq_len=float(job.max_seq_len),
            data_wait_ms=round(sum(step.data) / n, 3),
            tokenizer_wait_ms=round(step.tokenizer_ms, 3),
            sync_wait_ms=round(sum(step.sync) / n, 3),
            all_reduce_wait_ms=round(sum(step.allreduce) / n, 3),
            checkpoint_ms=round(checkpoint_ms, 3),
            pipeline_bubble_ratio=self._bubble_ratio(),
            loss=self._loss(global_step, numerics),
            grad_norm=self._grad_norm(numerics),
            learning_rate=learning_rate(global_step, job),
            world_size=n,
            global_batch_size=shape.global_batch,
            micro_batch_size=job.micro_batch_size,
            gradient_accumulation_steps=job.gradient_accumulation_steps,
            tensor_parallel_size=job.tensor_parallel_size,
            pipeline_parallel_size=job.pipeline_parallel_size,
            data_parallel_size=shape.data_parallel,
            ranks=ranks,
        )

    def _loss(self, global_step: int, numerics: LossState) -> float:
        """The power-law curve with ~1 % step-to-step noise and a harder batch now and then; NaN once diverged.

        The noise is drawn either way, so a fault changes no other noise stream of the simulation."""
        loss = expected_loss(global_step) + self.rng.gauss(0.0, 0.025)
        if numerics.diverged:
            return math.nan
        mix = (global_step * 2654435761) % 2**32  # Knuth's multiplicative hash: a fixed pseudo-random step
        if mix % HARD_BATCH_EVERY == 0:
            loss *= 1.02 + 0.04 * (mix >> 16) / 2**16
        return round(loss * numerics.factor, 4)

    def _grad_norm(self, numerics: LossState) -> float:
        norm = round(0.28 * math.exp(self.rng.gauss(0.0, 0.12)), 4)
        return math.nan if numerics.diverged else norm

    def stuck(
        self, ts: float, global_step: int, hung: tuple[int, ...], since: float, step: Step, gone: tuple[int, ...] = ()
    ) -> TrainingSample | None:
        """The heartbeats at ``ts`` of a job stuck on the ranks of ``hung`` since ``since`` (None without
        heartbeats): those ranks in their data loader, every other one inside the all-reduce since its compute
        ended; ``gone`` (local ranks whose process died) send none. Only ranks and the time: no step completed,
        so the report measures nothing."""
        if not self.job.heartbeats:
            return None
        ranks, names = [], self.names
        for r in names.reported:
            local = r < self.shape.gpus
            if local and r in gone:
                continue
            if local and r in hung:
                fields = self._heartbeat(global_step, "data", since)(r)
            else:
                arrived = since + step.compute[r % len(step.compute)] / 1000.0
                fields = self._heartbeat(global_step, "all_reduce", arrived)(r)
            rank = RankSample(rank=names.rank[r], gpu_index=r % self.shape.gpus, hostname=names.host[r], **fields)
            ranks.append(rank)
        return TrainingSample(timestamp=ts, ranks=tuple(ranks))

    def _heartbeat(self, global_step: int, phase: str, since: float) -> Callable[[int], dict[str, Any]]:
        """Rank → its heartbeat fields (none when the job sends no heartbeats)."""
        if not self.job.heartbeats:
            return lambda r: {}
        number = self.names.rank
        return lambda r: {"global_step": global_step, "phase": phase, "phase_since": since, "pid": PID_BASE + number[r]}

    def _bubble_ratio(self) -> float:
        """The schedule's idle share as a profiler would measure it: the theory, a little noisy."""
        bubble = self.shape.bubble
        if not bubble:
            return 0.0
        return round(min(1.0, max(0.0, bubble + self.rng.gauss(0.0, 0.004))), 4)

    def _avg_seq_len(self) -> float:
        """Real tokens per sequence: packing fills ~99.8 % of each; otherwise the batch's mean document."""
        job, gauss = self.job, self.rng.gauss
        if job.packing:
            return job.max_seq_len * (0.998 + 0.001 * max(-1.5, min(1.5, gauss(0.0, 1.0))))
        return min(float(job.max_seq_len), max(64.0, job.mean_doc_len * math.exp(gauss(0.0, 0.08))))
