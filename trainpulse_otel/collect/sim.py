"""A simulated 8x H100 node training a dense LLM, with named faults.

Why: every detector must be demonstrable on a laptop (``trainpulse daemon -mode
sim -scenario NAME``) and scorable by an evaluation harness that replays each
scenario. So the model is deterministic and pure — ``SimulatedNode.sample(t)``
depends only on the seed, the scenario and the sequence of ``t`` (seconds since
start); no wall clock, no I/O — and physically coherent across layers: GPU
clocks set compute time, compute time sets every rank's arrival at the
all-reduce, arrivals set sync waits, wall time, tokens/s and MFU, utilisation
sets power, power sets temperature, temperature sets throttling and clocks.
Faults (see :mod:`.scenarios`) only move a few knobs of this one model.

The healthy job: llama-3-8b pretraining in bf16 with PyTorch on one node of
8x "NVIDIA H100 80GB HBM3", dp=8 (tp=1, pp=1), micro batch 2 x GAS 2 x dp 8 =
32 packed sequences of 4096 tokens per step (~131k tokens), ~1.75 s per step,
~75k tokens/s, MFU ~0.45 (6·N·tokens/s / (world · 989 TFLOP/s)). Noise is
lognormal (step CV ~2 %), and the healthy run has rare isolated glitches a
detector must shrug off: a GC pause on one rank (one slow step), a one-tick
data-wait spike, a one-tick temperature-sensor blip, and a short checkpoint
save every 20 minutes (GPUs briefly ``gpu_idle``).

Cadence: each ``sample(t)`` returns GPUs and host as seen at ``t``, and one
training report describing the step that just finished. While a checkpoint
save blocks training, and after the job has been killed (the OOM scenarios),
no step finishes, so ``training`` is None; the step that ends a save reports
the save's length in ``checkpoint_ms``. ``global_step`` advances with the
simulated wall time, so with steps longer than the interval two reports may
carry the same step number.

Per-rank semantics (``TrainingSample.ranks``; rank i runs on local GPU i, ranks
beyond the node's GPUs run on hosts ``node-001``… with ``gpu_index = rank %
gpus``):

- ``step_time_ms`` — the rank's own busy time for the step: forward, backward
  and optimizer plus its part of the gradient all-reduce; NOT the time it spent
  waiting for slower peers.
- ``sync_wait_ms`` — that waiting: how long after this rank reached the
  all-reduce the last rank arrived (plus a small barrier latency).
- ``all_reduce_wait_ms`` — time in the gradient all-reduce proper; about equal
  across ranks, since everyone moves the same bytes.
- ``data_wait_ms`` — the rank's wait on its data loader before the step.
- ``tokens_per_sec`` — the rank's share of the step's tokens (global tokens /
  world size) over its own busy time, i.e. the rate it could sustain alone.

The job-level ``step_time_ms`` is the step's wall time: the latest arrival
(data wait + compute) over ranks, plus tokenizer wait, the all-reduce, fixed
overheads, any pipeline bubble and any checkpoint save. Job-level
``data_wait_ms``, ``sync_wait_ms`` and ``all_reduce_wait_ms`` are means over
ranks; ``tokens_per_sec`` counts real (non-padding) tokens over wall time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any

from ..samples import THROTTLE_REASONS, GpuSample, HostSample, RankSample, TrainingSample
from .base import Collected
from .scenarios import Scenario, get_scenario

# ------------------------------------------------------------------ hardware

GPU_NAME = "NVIDIA H100 80GB HBM3"
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
GPU_MEMORY_BYTES = 81559 * MIB
GPU_RESERVED_BYTES = 512 * MIB  # driver/context memory NVML counts as used
MAX_SM_CLOCK_MHZ = 1980.0
IDLE_SM_CLOCK_MHZ = 345.0
CLOCK_STEP_MHZ = 15.0
MIN_CLOCK_RATIO = 0.35
POWER_LIMIT_W = 700.0
PEAK_BF16_FLOPS = 989e12  # dense bf16 tensor-core peak of an H100 SXM

# Power: idle + busy * (static-under-load + dynamic * clock^3 * tensor intensity).
IDLE_POWER_W = 70.0
SAVE_POWER_W = 95.0  # SMs idle, HBM and copy engines busy during a checkpoint
LOADED_STATIC_W = 220.0
DYNAMIC_W = 370.0
POWER_CAP_HEADROOM = 0.985  # the power governor keeps a little under the cap

# Temperature: first-order towards inlet + R_th * power.
THERMAL_TAU_S = 12.0
INLET_C = 27.0
R_TH_C_PER_W = 0.060
SLOWDOWN_C = 87.0  # sw thermal slowdown engages
HW_SLOWDOWN_C = 87.5  # hardware slowdown joins in when the software controller lags
RELEASE_C = 86.0  # slowdown releases below this (hysteresis)

# ---------------------------------------------------------------------- host

CPU_COUNT = 192  # 2 sockets x 48 cores x 2 threads
HOST_MEMORY_BYTES = 2 * TIB
HOST_AVAILABLE_BYTES = int(1.4 * TIB)
HOST_RESERVE_BYTES = 6 * GIB  # what is left when the OOM killer strikes
JOB_RSS_BYTES = int(0.45 * TIB)  # freed when the job dies
SWAP_TOTAL_BYTES = 8 * GIB
SWAP_BASE_BYTES = 300 * MIB
SWAP_ONSET_AVAILABLE = 96 * GIB  # the kernel starts swapping below this
HOST_CPU_PERCENT = 26.0
SAVE_CPU_PERCENT = 6.0  # serialising a checkpoint

# ----------------------------------------------------------------------- job

COMPUTE_EFFICIENCY = 0.49  # model FLOPs / peak while a rank computes
ALLREDUCE_MS = 105.0  # exposed gradient all-reduce, NVLink, 8 ranks
ALLREDUCE_MULTINODE_MS = 170.0  # the same over InfiniBand across nodes
OVERHEAD_MS = 10.0  # Python, logging, LR scheduler
DATA_WAIT_MS = 4.0
TOKENIZER_MS = 1.5
BARRIER_MS = 1.5
STEP_JITTER = 0.02  # lognormal sigma shared by all ranks
RANK_JITTER = 0.008  # lognormal sigma per rank
RANK_SPREAD = 0.004  # static per-rank speed differences (silicon lottery)
COMM_UTIL_WEIGHT = 0.6  # share of comm/sync time NVML counts as "kernel running"
CHECKPOINT_EVERY_S = 1200.0
CHECKPOINT_SAVE_S = 5.0
BYTES_PER_PARAM_CHECKPOINT = 14  # bf16 weights + fp32 master + Adam m, v

# Rare healthy glitches (probability per tick).
P_GC_PAUSE = 1 / 400
P_DATA_SPIKE = 1 / 500
P_TEMP_BLIP = 1 / 600

MAX_RANKS = 4096


@dataclass(frozen=True, slots=True)
class JobConfig:
    """What is being trained and how; scenarios may override fields (``Scenario.job``)."""

    model_family: str = "llama"
    model_name: str = "llama-3-8b"
    framework: str = "pytorch"
    precision: str = "bf16"
    workload_kind: str = "pretraining"
    n_params: float = 8.03e9
    micro_batch_size: int = 2
    gradient_accumulation_steps: int = 2
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_seq_len: int = 4096
    packing: bool = True
    mean_doc_len: float = 1200.0  # mean real length of a sequence when not packing
    first_step: int = 24000  # the job resumed from a checkpoint
    peak_lr: float = 3e-4
    min_lr: float = 3e-5
    warmup_steps: int = 2000
    total_steps: int = 250000


# --------------------------------------------------------------- small physics


def gpu_power(busy: float, clock_ratio: float, intensity: float) -> float:
    """Board power for a utilisation, a clock (fraction of max) and tensor-core intensity."""
    return IDLE_POWER_W + busy * (LOADED_STATIC_W + DYNAMIC_W * clock_ratio**3 * intensity)


def clock_for_power(cap_w: float, busy: float, intensity: float) -> float:
    """The clock ratio at which a GPU this busy draws ``cap_w`` (what the governor picks)."""
    busy = max(busy, 0.05)
    cube = ((cap_w - IDLE_POWER_W) / busy - LOADED_STATIC_W) / (DYNAMIC_W * intensity)
    return min(1.0, max(MIN_CLOCK_RATIO, cube ** (1 / 3) if cube > 0 else 0.0))


def thermal_clock_ratio(temp_c: float) -> float:
    """The sw thermal controller's clock: deeper the further past the slowdown point."""
    mhz = MAX_SM_CLOCK_MHZ - 90.0 * (temp_c - 81.5)
    return min(1650.0, max(1350.0, mhz)) / MAX_SM_CLOCK_MHZ


def quantize_clock(ratio: float) -> float:
    """SM clocks move in 15 MHz steps."""
    return round(ratio * MAX_SM_CLOCK_MHZ / CLOCK_STEP_MHZ) * CLOCK_STEP_MHZ


def ordered_reasons(reasons: set[str]) -> tuple[str, ...]:
    """Throttle reasons in the contract's order, as the parser returns them."""
    return tuple(r for r in THROTTLE_REASONS if r in reasons)


def memory_pressure(frac: float) -> float:
    """0 below 94 % of GPU memory, rising to 1 at 98 %: how often the allocator retries."""
    return min(1.0, max(0.0, (frac - 0.94) / 0.04))


def learning_rate(step: int, job: JobConfig) -> float:
    """Linear warm-up then cosine decay, as most pretraining recipes use."""
    if step < job.warmup_steps:
        return job.peak_lr * step / job.warmup_steps
    done = min(1.0, (step - job.warmup_steps) / (job.total_steps - job.warmup_steps))
    return job.min_lr + 0.5 * (job.peak_lr - job.min_lr) * (1 + math.cos(math.pi * done))


def expected_loss(step: int) -> float:
    """A power-law loss curve: slowly decreasing at this point of training."""
    return 1.75 + 5.0 * step**-0.18


@dataclass(slots=True)
class _Gpu:
    """One GPU's fixed traits and its slowly changing state."""

    index: int
    uuid: str
    inlet_c: float
    r_th: float
    mem_frac: float  # healthy steady-state memory use
    temp_c: float
    throttled: bool = False
    busy: float = 0.96  # last tick's utilisation: the power governor's input


#: What each job-wide knob is when no fault moves it (see ``scenarios.JOB_KNOBS``).
JOB_HEALTHY: dict[str, float] = {
    "data_wait_frac": 0.0,
    "tokenizer_frac": 0.0,
    "kernel_density": 1.0,
    "flop_efficiency": 1.0,
    "imbalance_cv": 0.0,
    "allreduce_factor": 1.0,
    "power_cap_w": POWER_LIMIT_W,
    "checkpoint_every_s": CHECKPOINT_EVERY_S,
    "checkpoint_save_s": CHECKPOINT_SAVE_S,
    "host_cpu_percent": 0.0,
    "host_memory_leak": 0.0,
}

#: The same for per-GPU knobs; ``gpu_memory_frac`` is each GPU's own healthy level.
GPU_HEALTHY: dict[str, float] = {"cooling_loss": 1.0, "rank_slowdown": 1.0, "gpu_memory_leak": 0.0}


@dataclass(frozen=True, slots=True)
class _Knobs:
    """Every knob's value for one tick (fields named as the knobs), resolved once per tick."""

    data_wait_frac: float
    tokenizer_frac: float
    kernel_density: float
    flop_efficiency: float
    imbalance_cv: float
    allreduce_factor: float
    power_cap_w: float
    checkpoint_every_s: float
    checkpoint_save_s: float
    host_cpu_percent: float
    host_memory_leak: float
    cooling_loss: list[float]  # per local GPU
    rank_slowdown: list[float]  # per local GPU (and the rank on it)
    gpu_memory_frac: list[float]
    gpu_memory_leak: list[float]
    memory_frac: list[float]  # derived per GPU: in use / total, leak included

    @classmethod
    def healthy(cls, gpus: list[_Gpu]) -> _Knobs:
        """The knobs of a node with no fault."""
        per_gpu = {knob: [value] * len(gpus) for knob, value in GPU_HEALTHY.items()}
        memory = [g.mem_frac for g in gpus]
        return cls(**JOB_HEALTHY, **per_gpu, gpu_memory_frac=memory, memory_frac=memory)

    def at(self, scenario: Scenario, t: float) -> _Knobs:
        """These (healthy) knobs with the scenario's effects applied at ``t``.

        Each active effect moves its knob from the current value toward its
        level by its progress; effects on one knob apply in catalogue order.
        """
        changes: dict[str, Any] = {}
        for effect in scenario.effects:
            p = effect.progress(t, scenario.onset_s)
            if p <= 0:
                continue
            now = changes.get(effect.knob, getattr(self, effect.knob))
            if isinstance(now, list):
                gpus = effect.gpus
                now = [v + (effect.level - v) * p if gpus is None or i in gpus else v for i, v in enumerate(now)]
            else:
                now += (effect.level - now) * p
            changes[effect.knob] = now
        if not changes:
            return self
        if "gpu_memory_frac" in changes or "gpu_memory_leak" in changes:
            fracs = changes.get("gpu_memory_frac", self.gpu_memory_frac)
            leaks = changes.get("gpu_memory_leak", self.gpu_memory_leak)
            changes["memory_frac"] = [f + (1.0 - f) * leak for f, leak in zip(fracs, leaks)]
        return replace(self, **changes)


@dataclass(slots=True)
class _Step:
    """One training step's timing, per rank (ms) and for the job."""

    compute: list[float]
    data: list[float]
    sync: list[float]
    allreduce: list[float]
    tokenizer_ms: float
    wall_ms: float  # without any checkpoint save


@dataclass(slots=True)
class _Checkpointing:
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


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class SimulatedNode:
    """A deterministic model of one training node; ``sample(t)`` gives what it shows at ``t``."""

    def __init__(
        self,
        scenario: str | Scenario = "healthy",
        seed: int = 0,
        gpus: int = 8,
        ranks: int | None = None,
        interval_s: float = 1.0,
        start_ts: float = 1764400000.0,
        hostname: str = "node-000",
    ) -> None:
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.job = replace(JobConfig(), **self.scenario.job)
        self.gpus = gpus
        self.ranks = gpus if ranks is None else ranks
        self.interval_s = interval_s
        self.start_ts = start_ts
        self.hostname = hostname
        self._check_shape()
        self._derive_job()
        self._rng = random.Random(seed)
        self._gpu = [self._make_gpu(i) for i in range(gpus)]
        self._healthy = _Knobs.healthy(self._gpu)
        self._rank_speed = [math.exp(self._rng.gauss(0.0, RANK_SPREAD)) for _ in range(self.ranks)]
        self._rank_host = [self._host_of(r) for r in range(self.ranks)]
        self._phase = self._rng.uniform(0.0, 2 * math.pi)
        self._load = [CPU_COUNT * HOST_CPU_PERCENT / 100] * 3
        self._checkpoint = _Checkpointing()
        self._t: float | None = None
        self._settle = True
        self._steps = 0.0
        self._crashed = False

    # ------------------------------------------------------------ set-up

    def _check_shape(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {self.gpus}")
        if not self.gpus <= self.ranks <= MAX_RANKS:
            raise ValueError(f"ranks must be between gpus ({self.gpus}) and {MAX_RANKS}, got {self.ranks}")
        model_parallel = self.job.tensor_parallel_size * self.job.pipeline_parallel_size
        if self.ranks % model_parallel:
            raise ValueError(f"ranks ({self.ranks}) must be a multiple of tp*pp ({model_parallel})")

    def _derive_job(self) -> None:
        """Batch shape, FLOPs and healthy timings that follow from the configuration."""
        job = self.job
        model_parallel = job.tensor_parallel_size * job.pipeline_parallel_size
        self.data_parallel = self.ranks // model_parallel
        self.global_batch = job.micro_batch_size * job.gradient_accumulation_steps * self.data_parallel
        pp = job.pipeline_parallel_size
        self.bubble = (pp - 1) / (job.gradient_accumulation_steps + pp - 1)
        self.flops_per_token = 6.0 * job.n_params
        padded_tokens = self.global_batch * job.max_seq_len
        self._compute_ms = (
            padded_tokens * self.flops_per_token / self.ranks / (PEAK_BF16_FLOPS * COMPUTE_EFFICIENCY) * 1000
        )
        self.nodes = -(-self.ranks // self.gpus)
        ar_ms = ALLREDUCE_MS if self.nodes == 1 else ALLREDUCE_MULTINODE_MS + 5.0 * math.log2(self.nodes)
        self._allreduce_ms = ar_ms / model_parallel
        self._grad_bytes = 2.0 * job.n_params / model_parallel
        self._checkpoint_bytes = BYTES_PER_PARAM_CHECKPOINT * job.n_params

    def _make_gpu(self, index: int) -> _Gpu:
        """Fixed traits: inlet warmer further back in the chassis, a little part-to-part spread."""
        rng = self._rng
        inlet = INLET_C + 0.4 * index + rng.uniform(-0.8, 0.8)
        r_th = R_TH_C_PER_W * math.exp(rng.gauss(0.0, 0.02))
        mem_frac = rng.uniform(64.0e9, 68.0e9) / GPU_MEMORY_BYTES
        temp = inlet + r_th * gpu_power(0.96, 1.0, 1.0)
        return _Gpu(index, _uuid(rng), inlet, r_th, mem_frac, temp)

    def _host_of(self, rank: int) -> str:
        node = rank // self.gpus
        return self.hostname if node == 0 else f"node-{node:03d}"

    # ------------------------------------------------------------ sampling

    def sample(self, t: float) -> Collected:
        """What the node shows ``t`` seconds after start (call with increasing ``t``)."""
        self._settle = self._t is None  # start at equilibrium: the job has been running a while
        dt = self.interval_s if self._settle else max(0.0, t - self._t)
        self._t = t
        k = self._healthy.at(self.scenario, t)
        if k.host_memory_leak >= 1.0 or max(k.memory_frac) >= 1.0:
            self._crashed = True  # the OOM killer, or a CUDA OOM tearing the job down
        if self._crashed:
            return self._idle(t, dt, k, saving=False)
        if self._checkpoint.saving(dt):
            return self._idle(t, dt, k, saving=True)
        checkpoint_ms = self._checkpoint.finished_ms()
        if not checkpoint_ms and self._checkpoint.due(dt, k.checkpoint_every_s):
            self._checkpoint.start(k.checkpoint_save_s * (0.75 + 0.5 * self._rng.random()))
        return self._train(t, dt, k, checkpoint_ms)

    def _train(self, t: float, dt: float, k: _Knobs, checkpoint_ms: float) -> Collected:
        """A tick on which a step finished: time it, then show it on GPUs, host and the report."""
        intensity = 0.3 + 0.7 * k.flop_efficiency  # tensor-core share of the work: drives power
        clocks, reasons = zip(*(self._clock(g, k.power_cap_w, intensity) for g in self._gpu))
        step = self._step(k, clocks)
        self._steps += dt * 1000.0 / step.wall_ms
        gpus = self._busy_gpus(step, k, clocks, reasons, intensity, dt)
        cpu = HOST_CPU_PERCENT + k.host_cpu_percent
        host = self._host(t, dt, cpu, k.host_memory_leak, extra_write=0.0, wall_ms=step.wall_ms)
        return Collected(gpus=gpus, host=host, training=self._training(t, step, checkpoint_ms))

    def _idle(self, t: float, dt: float, k: _Knobs, saving: bool) -> Collected:
        """A tick with no step: a checkpoint save blocks training, or the job is dead."""
        gpus = self._idle_gpus(k, saving, dt)
        if saving:
            write = self._checkpoint_bytes / max(self._checkpoint.save_s, 1e-3)
            cpu = HOST_CPU_PERCENT + SAVE_CPU_PERCENT + k.host_cpu_percent
            host = self._host(t, dt, cpu, k.host_memory_leak, extra_write=write, wall_ms=None)
        else:
            host = self._host(t, dt, 1.0, None, extra_write=0.0, wall_ms=None)
        return Collected(gpus=gpus, host=host, training=None)

    # ------------------------------------------------------------ the step

    def _clock(self, gpu: _Gpu, cap_w: float, intensity: float) -> tuple[float, tuple[str, ...]]:
        """This tick's clock ratio and throttle reasons, from temperature and the power cap."""
        if gpu.temp_c >= SLOWDOWN_C:
            gpu.throttled = True
        elif gpu.temp_c < RELEASE_C:
            gpu.throttled = False
        ratio, reasons = 1.0, set()
        if gpu.throttled:
            ratio = thermal_clock_ratio(gpu.temp_c)
            reasons.add("sw_thermal")
            if gpu.temp_c >= HW_SLOWDOWN_C:
                reasons.update(("hw_slowdown", "hw_thermal"))
        budget = cap_w * POWER_CAP_HEADROOM
        if gpu_power(gpu.busy, ratio, intensity) > budget:
            ratio = min(ratio, clock_for_power(budget, gpu.busy, intensity))
            reasons.add("sw_power_cap")
        return ratio, ordered_reasons(reasons)

    def _step(self, k: _Knobs, clocks: tuple[float, ...]) -> _Step:
        """Time one step on every rank: compute, data, all-reduce, then who waits for whom."""
        rng, gauss, exp = self._rng, self._rng.gauss, math.exp
        compute = self._compute(k, clocks)
        allreduce_ms = self._allreduce_ms * k.allreduce_factor * exp(gauss(0.0, 0.03))
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
            barrier.append(BARRIER_MS * (0.5 + u))
        arrivals = [d + c for d, c in zip(data, compute)]
        last = max(arrivals)
        sync = [last - a + b for a, b in zip(arrivals, barrier)]
        f = k.tokenizer_frac
        tokenizer_ms = TOKENIZER_MS * exp(gauss(0.0, 0.3)) + f / (1 - f) * (last + allreduce_ms + OVERHEAD_MS)
        bubble_ms = max(compute) * self.bubble / (1 - self.bubble)
        wall = last + bubble_ms + tokenizer_ms + allreduce_ms + OVERHEAD_MS
        return _Step(compute, data, sync, allreduce, tokenizer_ms, wall)

    def _compute(self, k: _Knobs, clocks: tuple[float, ...]) -> list[float]:
        """Each rank's forward+backward+optimizer time (ms)."""
        rng, gauss, exp = self._rng, self._rng.gauss, math.exp
        base = self._compute_ms / (k.flop_efficiency * k.kernel_density) * exp(gauss(0.0, STEP_JITTER))
        compute = [base * speed * exp(gauss(0.0, RANK_JITTER)) for speed in self._rank_speed]
        if k.imbalance_cv:  # data-dependent work: a different rank draws the heavy batch each step
            compute = [c * max(0.4, 1.0 + k.imbalance_cv * gauss(0.0, 1.0)) for c in compute]
        for g, delay in enumerate(self._allocator_delay(k)):
            compute[g] *= k.rank_slowdown[g] / clocks[g] * delay
        if rng.random() < P_GC_PAUSE:  # a full Python GC on one rank
            compute[int(rng.random() * self.ranks)] += 200.0 + 400.0 * rng.random()
        return compute

    def _allocator_delay(self, k: _Knobs) -> list[float]:
        """Near-full GPU memory makes cudaMalloc retry (free the cache, synchronise): step jitter.

        Data-parallel ranks run the same graph on the same shapes, so their
        allocators fragment alike and retry on the same steps: one draw per tick.
        """
        pressure = [memory_pressure(frac) for frac in k.memory_frac]
        if not any(pressure):
            return [1.0] * self.gpus
        rng = self._rng
        jitter, retry, cost = rng.gauss(0.0, 1.0), rng.random(), rng.uniform(0.1, 0.3)
        return [
            math.exp(0.04 * p * jitter) * (1.0 + cost if retry < 0.3 * p else 1.0) for p in pressure
        ]

    # ------------------------------------------------------------ GPUs

    def _busy_gpus(
        self, step: _Step, k: _Knobs, clocks: tuple[float, ...], reasons: tuple[tuple[str, ...], ...],
        intensity: float, dt: float,
    ) -> tuple[GpuSample, ...]:
        """Training GPUs: utilisation from the step's time budget, power from utilisation and clock."""
        rng, heat, out = self._rng, self._heat(dt), []
        for gpu in self._gpu:
            g = gpu.index
            kernels = step.compute[g] * k.kernel_density / k.rank_slowdown[g]  # a starved GPU idles
            comm = COMM_UTIL_WEIGHT * (step.allreduce[g] + step.sync[g])
            busy = min(1.0, max(0.0, (kernels + comm) / step.wall_ms + rng.gauss(0.0, 0.006)))
            gpu.busy = busy
            power = min(gpu_power(busy, clocks[g], intensity) + rng.gauss(0.0, 6.0), k.power_cap_w * 0.998)
            clock_mhz = quantize_clock(clocks[g]) - (CLOCK_STEP_MHZ if rng.random() < 0.05 else 0.0)
            out.append(self._read_out(
                gpu, k, heat, util=busy * 100.0, mem_bw=busy * 40.0 * (0.5 + 0.5 * intensity),
                used=k.memory_frac[g] * GPU_MEMORY_BYTES, power=power, clock=clock_mhz, reasons=reasons[g],
            ))
        return tuple(out)

    def _idle_gpus(self, k: _Knobs, saving: bool, dt: float) -> tuple[GpuSample, ...]:
        """Idle GPUs: memory still held during a checkpoint save, released once the job died."""
        rng, heat, out = self._rng, self._heat(dt), []
        power_w = SAVE_POWER_W if saving else IDLE_POWER_W
        for gpu in self._gpu:
            gpu.busy, gpu.throttled = 0.0, False
            used = k.memory_frac[gpu.index] * GPU_MEMORY_BYTES if saving else GPU_RESERVED_BYTES
            out.append(self._read_out(
                gpu, k, heat, util=0.0, mem_bw=0.0, used=used, power=power_w + rng.gauss(0.0, 2.0),
                clock=IDLE_SM_CLOCK_MHZ, reasons=("gpu_idle",),
            ))
        return tuple(out)

    def _heat(self, dt: float) -> tuple[float, float]:
        """This tick's inlet drift (+-1.2 C over ~30 min) and how far temperatures move toward target."""
        drift = 1.2 * math.sin(2 * math.pi * (self._t or 0.0) / 1800.0 + self._phase)
        return drift, self._approach(dt, THERMAL_TAU_S)

    def _read_out(
        self,
        gpu: _Gpu,
        k: _Knobs,
        heat: tuple[float, float],
        *,
        util: float,
        mem_bw: float,
        used: float,
        power: float,
        clock: float,
        reasons: tuple[str, ...],
    ) -> GpuSample:
        """Read the GPU out the way NVML reports it, then heat it with this tick's power.

        The reading is the temperature the clocks and throttle reasons of this
        tick were chosen at, so the three always agree.
        """
        rng, (drift, alpha) = self._rng, heat
        target = gpu.inlet_c + drift + gpu.r_th * k.cooling_loss[gpu.index] * power
        if self._settle:
            gpu.temp_c = target
        reading = gpu.temp_c + rng.gauss(0.0, 0.25)
        gpu.temp_c += (target - gpu.temp_c) * alpha
        if rng.random() < P_TEMP_BLIP / self.gpus:
            reading += 2.5 + 1.5 * rng.random()  # a one-tick sensor blip
        used_mib = min(GPU_MEMORY_BYTES // MIB, int(used / MIB) + (rng.random() < 0.1))
        return GpuSample(
            index=gpu.index,
            uuid=gpu.uuid,
            name=GPU_NAME,
            utilization_percent=float(min(100, max(0, round(util)))),
            memory_utilization_percent=float(min(100, max(0, round(mem_bw)))),
            memory_used_bytes=used_mib * MIB,
            memory_total_bytes=GPU_MEMORY_BYTES,
            temperature_celsius=float(round(reading)),
            power_watts=round(max(0.0, power), 3),
            power_limit_watts=float(k.power_cap_w),
            sm_clock_mhz=float(clock),
            max_sm_clock_mhz=MAX_SM_CLOCK_MHZ,
            throttle_reasons=reasons,
            ecc_uncorrected_errors=0,
        )

    def _approach(self, dt: float, tau: float) -> float:
        """How far a first-order quantity moves toward its target in ``dt`` (all the way at start)."""
        return 1.0 if self._settle else 1.0 - math.exp(-dt / tau)

    # ------------------------------------------------------------ host

    def _host(
        self, t: float, dt: float, cpu: float, leak: float | None, extra_write: float, wall_ms: float | None
    ) -> HostSample:
        """The host: CPU and load, memory (minus any leak; ``leak=None`` once the job is gone), I/O."""
        gauss, exp = self._rng.gauss, math.exp
        cpu = min(99.5, max(0.5, cpu + gauss(0.0, 1.5)))
        load1, load5, load15 = self._update_load(cpu, dt)
        wave = 3.0e9 * math.sin(2 * math.pi * t / 1300.0 + self._phase) + gauss(0.0, 0.4e9)
        if leak is None:
            available = HOST_AVAILABLE_BYTES + JOB_RSS_BYTES + wave
        else:
            available = HOST_AVAILABLE_BYTES + wave - leak * (HOST_AVAILABLE_BYTES - HOST_RESERVE_BYTES)
        available = max(HOST_RESERVE_BYTES / 2, available)
        squeeze = min(1.0, max(0.0, (SWAP_ONSET_AVAILABLE - available) / (SWAP_ONSET_AVAILABLE - HOST_RESERVE_BYTES)))
        swap = SWAP_BASE_BYTES + (0.9 * SWAP_TOTAL_BYTES - SWAP_BASE_BYTES) * squeeze
        net = self._allreduce_traffic(wall_ms)
        return HostSample(
            cpu_percent=round(cpu, 1),
            cpu_count=CPU_COUNT,
            load1=round(load1, 2),
            load5=round(load5, 2),
            load15=round(load15, 2),
            memory_total_bytes=HOST_MEMORY_BYTES,
            memory_available_bytes=int(available),
            swap_total_bytes=SWAP_TOTAL_BYTES,
            swap_used_bytes=int(swap),
            disk_read_bytes_per_sec=round(45e6 * exp(gauss(0.0, 0.3)), 1),
            disk_write_bytes_per_sec=round(12e6 * exp(gauss(0.0, 0.4)) + extra_write, 1),
            net_rx_bytes_per_sec=round(60e6 * exp(gauss(0.0, 0.3)) + net, 1),
            net_tx_bytes_per_sec=round(4e6 * exp(gauss(0.0, 0.3)) + net, 1),
        )

    def _update_load(self, cpu: float, dt: float) -> list[float]:
        """Load averages as the kernel keeps them: EMAs (1, 5, 15 min) of the run queue."""
        saturation = 1.0 + 0.4 * max(0.0, cpu - 85.0) / 15.0  # runnable threads queue up
        runq = CPU_COUNT * cpu / 100.0 * saturation
        for i, tau in enumerate((60.0, 300.0, 900.0)):
            self._load[i] += (runq - self._load[i]) * self._approach(dt, tau)
        return self._load

    def _allreduce_traffic(self, wall_ms: float | None) -> float:
        """NIC bytes/s each way for the inter-node all-reduce (none on one node: NVLink)."""
        if self.nodes == 1 or wall_ms is None:
            return 0.0
        return 2.0 * self._grad_bytes * (self.nodes - 1) / self.nodes / (wall_ms / 1000.0)

    # ------------------------------------------------------------ training

    def _training(self, t: float, step: _Step, checkpoint_ms: float) -> TrainingSample:
        """The training loop's report for the step that just finished."""
        job, gauss, n = self.job, self._rng.gauss, self.ranks
        global_step = job.first_step + int(self._steps)
        avg_seq = self._avg_seq_len()
        tokens = self.global_batch * avg_seq
        step_ms = step.wall_ms + checkpoint_ms
        tokens_per_sec = tokens / (step_ms / 1000.0)
        achieved = self.flops_per_token * tokens_per_sec / n
        rank_tokens = tokens / n
        ranks = tuple(
            RankSample(
                rank=r,
                gpu_index=r % self.gpus,
                hostname=self._rank_host[r],
                step_time_ms=round(step.compute[r] + step.allreduce[r], 3),
                tokens_per_sec=round(rank_tokens / ((step.compute[r] + step.allreduce[r]) / 1000.0), 1),
                data_wait_ms=round(step.data[r], 3),
                sync_wait_ms=round(step.sync[r], 3),
                all_reduce_wait_ms=round(step.allreduce[r], 3),
            )
            for r in range(n)
        )
        return TrainingSample(
            timestamp=self.start_ts + t,
            workload_kind=job.workload_kind,
            model_family=job.model_family,
            model_name=job.model_name,
            framework=job.framework,
            precision=job.precision,
            hostname=self.hostname,
            global_step=global_step,
            step_time_ms=round(step_ms, 3),
            tokens_per_sec=round(tokens_per_sec, 1),
            samples_per_sec=round(self.global_batch / (step_ms / 1000.0), 3),
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
            loss=round(expected_loss(global_step) + gauss(0.0, 0.025), 4),
            grad_norm=round(0.28 * math.exp(gauss(0.0, 0.12)), 4),
            learning_rate=learning_rate(global_step, job),
            world_size=n,
            global_batch_size=self.global_batch,
            micro_batch_size=job.micro_batch_size,
            gradient_accumulation_steps=job.gradient_accumulation_steps,
            tensor_parallel_size=job.tensor_parallel_size,
            pipeline_parallel_size=job.pipeline_parallel_size,
            data_parallel_size=self.data_parallel,
            ranks=ranks,
        )

    def _bubble_ratio(self) -> float:
        """The schedule's idle share as a profiler would measure it: the theory, a little noisy."""
        if not self.bubble:
            return 0.0
        return round(min(1.0, max(0.0, self.bubble + self._rng.gauss(0.0, 0.004))), 4)

    def _avg_seq_len(self) -> float:
        """Real tokens per sequence: packing fills ~99.8 % of each; otherwise the batch's mean document."""
        job, gauss = self.job, self._rng.gauss
        if job.packing:
            return job.max_seq_len * (0.998 + 0.001 * max(-1.5, min(1.5, gauss(0.0, 1.0))))
        return min(float(job.max_seq_len), max(64.0, job.mean_doc_len * math.exp(gauss(0.0, 0.08))))


class SimCollector:
    """The ``sim`` collector: a :class:`SimulatedNode` driven by the daemon's clock.

    The first ``collect(now)`` anchors the node at ``now``; each call samples it
    at ``now - first_now``, so timestamps are the daemon's own.
    """

    name = "sim"

    def __init__(
        self,
        scenario: str | Scenario = "healthy",
        seed: int = 0,
        interval_s: float = 1.0,
        gpus: int = 8,
        ranks: int | None = None,
    ) -> None:
        self.node = SimulatedNode(scenario, seed, gpus, ranks, interval_s)
        self.seed = seed
        self._first_now: float | None = None

    def collect(self, now: float) -> Collected:
        """Sample the simulated node at ``now`` (unix seconds)."""
        if self._first_now is None:
            self._first_now = self.node.start_ts = now
        return self.node.sample(now - self._first_now)

    def describe(self) -> dict[str, Any]:
        """What this collector simulates, for logs and the snapshot."""
        node = self.node
        return {"name": self.name, "scenario": node.scenario.name, "seed": self.seed,
                "gpus": node.gpus, "ranks": node.ranks}

    def close(self) -> None:
        """Nothing to release."""
