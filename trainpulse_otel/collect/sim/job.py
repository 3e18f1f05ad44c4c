"""What the simulated node trains: the job's configuration, the shape that follows, its schedules.

The healthy job is llama-3-8b pretraining in bf16 with PyTorch, dp over every
rank (tp=1, pp=1), micro batch 2 x GAS 2 x dp; scenarios override fields of
:class:`JobConfig` for a mis-configured job (``Scenario.job``), and
:class:`JobShape` derives everything the step model needs from it once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .physics import PEAK_BF16_FLOPS

COMPUTE_EFFICIENCY = 0.49  # model FLOPs / peak while a rank computes
ALLREDUCE_MS = 105.0  # exposed gradient all-reduce, NVLink, 8 ranks
ALLREDUCE_MULTINODE_MS = 170.0  # the same over InfiniBand across nodes
OVERHEAD_MS = 10.0  # Python, logging, LR scheduler
DATA_WAIT_MS = 4.0
TOKENIZER_MS = 1.5
#: The barrier before the all-reduce is itself a collective: every rank pays its latency and the device sync,
#: equally (a real 4-rank gloo job paid ~8.5 ms a step on every rank). As a share of the all-reduce.
BARRIER_OF_ALLREDUCE = 0.2
STEP_JITTER = 0.02  # lognormal sigma shared by all ranks
RANK_JITTER = 0.008  # lognormal sigma per rank
RANK_SPREAD = 0.004  # static per-rank speed differences (silicon lottery)
COMM_UTIL_WEIGHT = 0.6  # share of comm/sync time NVML counts as "kernel running"
CHECKPOINT_EVERY_S = 1200.0
CHECKPOINT_SAVE_S = 5.0
BYTES_PER_PARAM_CHECKPOINT = 14  # bf16 weights + fp32 master + Adam m, v

#: NCCL's InfiniBand transport gives up on a peer after NCCL_IB_RETRY_CNT (7) retries beyond the first try, each
#: waiting 4.096 us x 2^NCCL_IB_TIMEOUT (18): ~8.6 s from a link's failure to its completion error.
IB_GIVE_UP_S = 4.096e-6 * 2**18 * (7 + 1)

# Rare healthy glitches (probability per tick).
P_GC_PAUSE = 1 / 400
P_DATA_SPIKE = 1 / 500
P_TEMP_BLIP = 1 / 600

MAX_RANKS = 4096
#: GPUs on each simulated node (8x H100).
NODE_GPUS = 8


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
    heartbeats: bool = False  # ranks send TrainPulse heartbeats (global_step, phase, phase_since, pid)
    peer_nodes: int = 0  # other nodes of the job this simulated daemon also hears, as its job daemon (peers.py)
    lost_peer: int = 2  # the one of them that goes silent while the ``peer_lost`` knob is on
    nodes: int = 1  # nodes the job spans when the simulator is not given its ranks (the rest on node-001…)
    #: The daemon reads the job's console output (``-follow``): what a failure prints reaches it as events (console.py).
    logs: bool = False
    #: How the ranks were started: ``torchrun`` (``[rankN]:`` before each line; a rank that dies takes the node's
    #: job down, its agent reports it) or ``srun`` (a task per GPU, each writing its own file; the others live on).
    launcher: str = "torchrun"
    #: The process group's timeout (``init_process_group(timeout=...)``): NCCL's watchdog fires after it. 10 min is
    #: PyTorch's default.
    collective_timeout_s: float = 600.0
    #: TORCH_NCCL_ASYNC_ERROR_HANDLING: True (3, the default) takes a rank's process down on a collective's error or
    #: timeout; False (0) only reports it and leaves the process up.
    watchdog_teardown: bool = True
    #: torchrun's ``--max-restarts``: once the launcher has ended the job (a rank died), it starts the workers again
    #: ``restart_after_s`` later (noticing, rendezvous, the processes' start and the checkpoint's load), from the
    #: last checkpoint saved; the fault that killed a rank is spent (a new process). None: no restart.
    restart_after_s: float | None = None
    #: The part of that gap the restarted job spends loading the checkpoint (it prints how long).
    checkpoint_load_s: float = 0.0


@dataclass(frozen=True, slots=True)
class JobShape:
    """Batch shape, FLOPs and healthy timings of a job on ``ranks`` ranks, ``gpus`` of them per node."""

    ranks: int
    gpus: int
    data_parallel: int
    global_batch: int
    bubble: float  # the pipeline schedule's idle share
    flops_per_token: float
    compute_ms: float  # one rank's healthy forward+backward+optimizer time
    nodes: int
    allreduce_ms: float
    grad_bytes: float
    checkpoint_bytes: float

    @classmethod
    def of(cls, job: JobConfig, ranks: int, gpus: int) -> JobShape:
        """The shape of ``job`` on that many ranks; a ValueError when they cannot run it."""
        if gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {gpus}")
        if not gpus <= ranks <= MAX_RANKS:
            raise ValueError(f"ranks must be between gpus ({gpus}) and {MAX_RANKS}, got {ranks}")
        model_parallel = job.tensor_parallel_size * job.pipeline_parallel_size
        if ranks % model_parallel:
            raise ValueError(f"ranks ({ranks}) must be a multiple of tp*pp ({model_parallel})")
        data_parallel = ranks // model_parallel
        global_batch = job.micro_batch_size * job.gradient_accumulation_steps * data_parallel
        pp = job.pipeline_parallel_size
        flops_per_token = 6.0 * job.n_params
        padded_tokens = global_batch * job.max_seq_len
        nodes = -(-ranks // gpus)
        allreduce_ms = ALLREDUCE_MS if nodes == 1 else ALLREDUCE_MULTINODE_MS + 5.0 * math.log2(nodes)
        return cls(
            ranks=ranks,
            gpus=gpus,
            data_parallel=data_parallel,
            global_batch=global_batch,
            bubble=(pp - 1) / (job.gradient_accumulation_steps + pp - 1),
            flops_per_token=flops_per_token,
            compute_ms=padded_tokens * flops_per_token / ranks / (PEAK_BF16_FLOPS * COMPUTE_EFFICIENCY) * 1000,
            nodes=nodes,
            allreduce_ms=allreduce_ms / model_parallel,
            grad_bytes=2.0 * job.n_params / model_parallel,
            checkpoint_bytes=BYTES_PER_PARAM_CHECKPOINT * job.n_params,
        )


def learning_rate(step: int, job: JobConfig) -> float:
    """Linear warm-up then cosine decay, as most pretraining recipes use."""
    if step < job.warmup_steps:
        return job.peak_lr * step / job.warmup_steps
    done = min(1.0, (step - job.warmup_steps) / (job.total_steps - job.warmup_steps))
    return job.min_lr + 0.5 * (job.peak_lr - job.min_lr) * (1 + math.cos(math.pi * done))


def expected_loss(step: int) -> float:
    """A power-law loss curve: slowly decreasing at this point of training."""
    return 1.75 + 5.0 * step**-0.18
