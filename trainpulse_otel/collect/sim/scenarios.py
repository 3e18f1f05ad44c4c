"""The simulator's fault catalogue: one realistic fault per contract signal.

A scenario is a small declarative description — which *knobs* of the shared
physical model (:mod:`trainpulse_otel.collect.sim`, its knobs in :mod:`.knobs`) move, on which GPUs, from
when, and how fast — plus what a correct diagnosis of it looks like. Nothing
here computes a sample: keeping every scenario a handful of :class:`Effect` rows
applied by one model is what keeps the layers coherent (a throttled GPU really
runs slower, its rank really is late, its peers really wait) and what keeps the
scenarios from drifting into twenty hand-written copies of the same loop.

The expectation fields (``expected_signals``, ``allowed_signals``,
``expected_cause``, ``expected_subject``) are the answer key an evaluation
harness scores the detectors against; ``duration_s`` is how long to replay a
scenario for that scoring, and ``exhaust_s`` (for the leak scenarios) is when
the leaked memory runs out, so a forecast's lead time can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .job import IB_GIVE_UP_S
from .knobs import GPU_KNOBS, JOB_KNOBS, LEAK_KNOBS, Effect

__all__ = ["GPU_KNOBS", "JOB_KNOBS", "SCENARIOS", "Effect", "Scenario", "get_scenario"]

#: The contract's shortest stall: ``training_stalled`` exists only once no step has completed for this long.
STALL_DEFINED_AFTER_S = 30.0
#: The NCCL watchdog's timeout of the ``collective_timeout`` job. Real jobs wait 10-30 minutes (PyTorch's default
#: is 10); a minute keeps the scenario a few minutes long, and nothing the diagnosis reads depends on the length.
SHORT_WATCHDOG_S = 60.0


@dataclass(frozen=True)
class Scenario:
    """A named fault: the effects that make it and the diagnosis that should follow."""

    name: str
    description: str
    onset_s: float
    duration_s: float
    expected_signals: frozenset[str]
    allowed_signals: frozenset[str]
    expected_cause: str | None
    expected_subject: dict[str, int | str] = field(default_factory=dict)
    effects: tuple[Effect, ...] = ()
    #: Overrides of the simulated job's configuration (:class:`.job.JobConfig` fields),
    #: in force from the first sample: a mis-configured job, not an event.
    job: Mapping[str, Any] = field(default_factory=dict)
    #: The catalogue scenarios a combination runs at once (:mod:`.combine`); empty for one fault.
    parts: tuple[Scenario, ...] = ()
    #: How long the fault must last before its signal is defined to exist (``training_stalled``: the contract's
    #: 30 s without a step); the evaluation's latency figures count from then.
    defined_after_s: float = 0.0
    #: A leak scenario whose fault is the kill itself (``out_of_memory``): judged at the end, after it, not one
    #: tick before the memory runs out as the forecasts are.
    after_kill: bool = False

    @property
    def expected_causes(self) -> tuple[str, ...]:
        """Every root cause a correct diagnosis names: this fault's, or each part's of a combination."""
        if self.parts:
            return tuple(cause for part in self.parts for cause in part.expected_causes)
        return () if self.expected_cause is None else (self.expected_cause,)

    def starting_at(self, onset_s: float) -> Scenario:
        """This fault beginning ``onset_s`` seconds into the run (``-onset``) instead of at its own onset.

        Every effect moves with it (one with its own onset keeps its distance
        from the scenario's), and so does each part of a combination; ``job``
        overrides, a mis-configured job, stay in force from the first sample.
        """
        shift = onset_s - self.onset_s
        effects = tuple(e if e.onset_s is None else replace(e, onset_s=e.onset_s + shift) for e in self.effects)
        parts = tuple(p.starting_at(p.onset_s + shift) for p in self.parts)
        return replace(self, onset_s=onset_s, effects=effects, parts=parts)

    @property
    def exhaust_s(self) -> float | None:
        """When a leak scenario's memory runs out (the OOM kill), else None."""
        ends = [e.start(self.onset_s) + e.ramp_s for e in self.effects if e.knob in LEAK_KNOBS]
        return min(ends) if ends else None


def _scenario(
    name: str,
    description: str,
    *effects: Effect,
    cause: str | None,
    onset_s: float = 90.0,
    duration_s: float = 300.0,
    expected: tuple[str, ...] | None = None,
    allowed: tuple[str, ...] = (),
    subject: dict[str, int | str] | None = None,
    job: Mapping[str, Any] | None = None,
    defined_after_s: float = 0.0,
    after_kill: bool = False,
) -> Scenario:
    """Build a catalogue entry; a scenario named after a signal expects that signal."""
    return Scenario(
        name=name,
        description=description,
        onset_s=onset_s,
        duration_s=duration_s,
        expected_signals=frozenset((name,) if expected is None else expected),
        allowed_signals=frozenset(allowed),
        expected_cause=cause,
        expected_subject=dict(subject or {}),
        effects=effects,
        job=dict(job or {}),
        defined_after_s=defined_after_s,
        after_kill=after_kill,
    )


_CATALOGUE: tuple[Scenario, ...] = (
    _scenario(
        "healthy",
        "A well-tuned llama-3-8b pretraining job on 8x H100, with realistic noise and rare glitches.",
        cause=None,
        onset_s=0.0,
        duration_s=3600.0,
        expected=(),
    ),
    _scenario(
        "dataloader_starvation",
        "Slow storage and too few loader workers: data wait ramps to ~42% of the step, host CPU saturates.",
        Effect("data_wait_frac", 0.42, ramp_s=90.0),
        Effect("host_cpu_percent", 68.0, ramp_s=90.0),
        cause="input_pipeline_bound",
        allowed=("gpu_underutilization", "throughput_collapse"),
    ),
    _scenario(
        "gpu_underutilization",
        "Kernel-launch bound (tiny micro-batches, Python overhead): GPUs run kernels ~42% of the time.",
        Effect("kernel_density", 0.42, ramp_s=60.0),
        Effect("host_cpu_percent", 12.0, ramp_s=60.0),
        cause="compute_inefficiency",
        allowed=("low_mfu", "throughput_collapse"),
    ),
    _scenario(
        "sync_imbalance",
        "Data-dependent load imbalance: per-rank work varies ~25% step to step, a different rank is last each time.",
        Effect("imbalance_cv", 0.25, ramp_s=30.0),
        cause="load_imbalance",
        allowed=("gpu_underutilization", "throughput_collapse"),
    ),
    _scenario(
        "memory_pressure",
        "Allocator fragmentation: GPU memory climbs to ~98% on every GPU; cudaMalloc retries jitter the step.",
        Effect("gpu_memory_frac", 0.98, ramp_s=120.0),
        cause="gpu_memory_pressure",
        allowed=("oom_risk",),
    ),
    _scenario(
        "thermal_instability",
        "GPU 5's cooling fails: it cycles around its 87 C slowdown point, throttling on and off; its rank lags.",
        Effect("cooling_loss", 1.75, gpus=(5,), ramp_s=60.0),
        cause="gpu_thermal_throttling",
        subject={"gpu_index": 5, "rank": 5},
        allowed=("rank_straggler", "sync_imbalance", "throughput_collapse", "thermal_throttle_risk"),
    ),
    _scenario(
        "throughput_collapse",
        "A 350 W power cap lands on every GPU at once: clocks fall to ~1150 MHz and tokens/s by ~40%.",
        Effect("power_cap_w", 350.0),
        cause="gpu_power_throttling",
        allowed=("low_mfu", "gpu_underutilization"),
    ),
    _scenario(
        "low_mfu",
        "From the start: GPUs are busy but matmuls run unfused/in fp32, so MFU sits near 0.14.",
        Effect("flop_efficiency", 0.30),
        cause="compute_inefficiency",
        onset_s=0.0,
        duration_s=180.0,
    ),
    _scenario(
        "sequence_padding",
        "From the start: no sequence packing; documents average ~1200 of 4096 tokens, the rest is padding.",
        cause="padding_waste",
        onset_s=0.0,
        duration_s=180.0,
        allowed=("low_mfu",),
        job={"packing": False, "mean_doc_len": 1200.0},
    ),
    _scenario(
        "tokenizer_stall",
        "On-the-fly tokenization falls behind: tokenizer wait ramps to ~35% of the step, host CPU runs hot.",
        Effect("tokenizer_frac", 0.35, ramp_s=90.0),
        Effect("host_cpu_percent", 55.0, ramp_s=90.0),
        cause="tokenizer_bound",
        allowed=("gpu_underutilization", "throughput_collapse"),
    ),
    _scenario(
        "allreduce_wait",
        "NCCL falls back from NVLink to a host path: the all-reduce takes ~4.5x longer on every rank.",
        Effect("allreduce_factor", 4.5, ramp_s=30.0),
        cause="communication_bound",
        allowed=("throughput_collapse", "gpu_underutilization"),
    ),
    _scenario(
        "checkpoint_stall",
        "Synchronous checkpoints to slow storage: every ~35 s of training a save blocks for 20-33 s.",
        Effect("checkpoint_every_s", 35.0),
        Effect("checkpoint_save_s", 26.0),
        cause="checkpoint_io_bound",
        onset_s=60.0,
        duration_s=360.0,
        allowed=("gpu_underutilization", "throughput_collapse"),
    ),
    _scenario(
        "pipeline_bubble",
        "From the start: 4 pipeline stages with only 4 micro-batches per step, so ~43% of the schedule idles.",
        cause="pipeline_bubbles",
        onset_s=0.0,
        duration_s=180.0,
        allowed=("gpu_underutilization", "low_mfu"),
        job={"pipeline_parallel_size": 4, "micro_batch_size": 4, "gradient_accumulation_steps": 4},
    ),
    _scenario(
        "rank_straggler",
        "A noisy neighbour on rank 5's CPU cores starves GPU 5: rank 5 runs ~35% slower, its peers wait.",
        Effect("rank_slowdown", 1.35, gpus=(5,), ramp_s=20.0),
        Effect("host_cpu_percent", 3.0, ramp_s=20.0),
        cause="straggler_rank",
        subject={"rank": 5, "gpu_index": 5},
        allowed=("sync_imbalance",),
    ),
    _scenario(
        "oom_risk",
        "32 training processes each grow a Python-side cache (~70 MB/s) until the OOM killer ends the job.",
        Effect("host_memory_leak", 1.0, ramp_s=690.0),
        cause="host_memory_pressure",
        duration_s=900.0,
        allowed=("memory_pressure",),
    ),
    _scenario(
        "thermal_throttle_risk",
        "GPU 2's fan is failing: it warms ~1 C every 15 s from ~68 C toward its 87 C slowdown point.",
        Effect("cooling_loss", 2.0, gpus=(2,), ramp_s=660.0),
        cause="gpu_thermal_throttling",
        onset_s=60.0,
        subject={"gpu_index": 2},
    ),
    _scenario(
        "training_stalled",
        "Rank 3's data loader deadlocks before its all-reduce for 3 minutes; its heartbeat stays in `data` at "
        "the last step while the other ranks wait inside the all-reduce (GPUs ~100% busy at ~125 W).",
        Effect("rank_hang", 1.0, gpus=(3,)),
        Effect("rank_hang", 0.0, gpus=(3,), onset_s=270.0),
        cause="rank_hang",
        duration_s=200.0,
        subject={"rank": 3, "gpu_index": 3},
        job={"heartbeats": True},
        defined_after_s=STALL_DEFINED_AFTER_S,
    ),
    _scenario(
        "training_stalled_no_heartbeat",
        "The same hang in a job that sends no heartbeats: GPU 3 idles while its peers spin busy at low power.",
        Effect("rank_hang", 1.0, gpus=(3,)),
        Effect("rank_hang", 0.0, gpus=(3,), onset_s=270.0),
        cause="rank_hang",
        duration_s=200.0,
        expected=("training_stalled",),
        subject={"rank": 3, "gpu_index": 3},
        defined_after_s=STALL_DEFINED_AFTER_S,
    ),
    _scenario(
        "node_unreachable",
        "This daemon is node-000 of a 4-node job and its job daemon; node-002 goes silent (a kernel panic): its "
        "ranks 16-23 with it, and the rest of the job waits inside the all-reduce for them.",
        Effect("peer_lost", 1.0),
        cause="node_failure",
        duration_s=200.0,
        allowed=("training_stalled", "throughput_collapse", "gpu_underutilization"),
        subject={"hostname": "node-002"},
        job={"peer_nodes": 3, "heartbeats": True},
    ),
    _scenario(
        "gpu_memory_leak",
        "Rank 3 keeps references to old activations: GPU 3's memory grows ~24 MB/s until CUDA runs out.",
        Effect("gpu_memory_leak", 1.0, gpus=(3,), ramp_s=720.0),
        cause="gpu_memory_pressure",
        expected=("oom_risk",),
        duration_s=900.0,
        subject={"gpu_index": 3},
        allowed=("memory_pressure",),
    ),
    _scenario(
        "gpu_hardware_fault",
        "GPU 4 falls off the bus (XID 79): it leaves NVML's GPU list, its rank stops stepping and the other "
        "ranks spin in the all-reduce waiting for it (GPUs busy at low power).",
        Effect("gpu_lost", 1.0, gpus=(4,)),
        cause="gpu_hardware_failure",
        duration_s=240.0,
        subject={"gpu_index": 4, "rank": 4},
        allowed=("rank_straggler", "sync_imbalance", "throughput_collapse", "training_stalled"),
    ),
    _scenario(
        "gpu_memory_degradation",
        "GPU 6's HBM wears out: corrected ECC errors climb to ~2/s over a minute, then a row remap is "
        "recorded (XID 63) and waits for a GPU reset. Training goes on at full speed.",
        Effect("ecc_corrected_rate", 2.0, gpus=(6,), ramp_s=60.0),
        Effect("row_remap_pending", 1.0, gpus=(6,), onset_s=240.0),
        cause="gpu_hardware_failure",
        duration_s=360.0,
        subject={"gpu_index": 6},
    ),
    _scenario(
        "link_degradation",
        "GPU 7's PCIe link retrains at x8 of x16 (a loose riser): its host transfers take twice as long, rank 7 "
        "runs ~30% slower and its peers wait for it.",
        Effect("pcie_width", 8.0, gpus=(7,)),
        Effect("rank_slowdown", 1.3, gpus=(7,), ramp_s=10.0),
        cause="interconnect_degradation",
        subject={"gpu_index": 7, "rank": 7},
        expected=("link_degradation", "rank_straggler"),
        allowed=("sync_imbalance",),
    ),
    _scenario(
        "loss_spike",
        "A bad data shard: the loss jumps to ~1.7x for ~20 s, then recovers over a minute; nothing else changes.",
        Effect("loss_factor", 1.7),
        Effect("loss_factor", 1.0, onset_s=110.0, ramp_s=60.0),
        cause="numerical_instability",
        duration_s=180.0,
    ),
    _scenario(
        "nonfinite_loss",
        "The learning rate is too high: the loss climbs ~3x over 15 s, then goes NaN; the job keeps stepping.",
        Effect("divergence", 1.0, ramp_s=15.0),
        cause="numerical_instability",
        allowed=("loss_spike",),
    ),
    _scenario(
        "collective_timeout",
        "Rank 6's data loader deadlocks before its all-reduce; a minute later the NCCL watchdog of each of the "
        "other 7 ranks gives up on the collective they wait in (the same SeqNum) and says so; rank 6 says nothing.",
        Effect("rank_hang", 1.0, gpus=(6,)),
        cause="rank_hang",
        duration_s=200.0,
        expected=("collective_timeout", "training_stalled"),
        subject={"rank": 6, "gpu_index": 6},
        job={"logs": True, "collective_timeout_s": SHORT_WATCHDOG_S, "watchdog_teardown": False},
        defined_after_s=SHORT_WATCHDOG_S,
    ),
    _scenario(
        "network_error",
        "A 2-node job: the InfiniBand NIC of node-000's GPU 2 fails; ~9 s of NCCL retries later rank 2 prints the "
        "NET/IB completion error, its process group takes it down (SIGABRT), and torchrun ends the node's job.",
        Effect("link_error", 1.0, gpus=(2,)),
        cause="network_failure",
        duration_s=200.0,
        allowed=("rank_crashed", "collective_timeout", "training_stalled"),
        subject={"rank": 2, "hostname": "node-000"},
        job={"logs": True, "nodes": 2},
        defined_after_s=IB_GIVE_UP_S,
    ),
    _scenario(
        "out_of_memory",
        "Rank 3 keeps references to old activations: GPU 3's memory fills in 4 minutes until the step's logits no "
        "longer fit; rank 3 dies of torch.OutOfMemoryError and torchrun ends the job (judged after the kill).",
        Effect("gpu_memory_leak", 1.0, gpus=(3,), ramp_s=240.0),
        cause="gpu_memory_pressure",
        duration_s=360.0,
        allowed=("oom_risk", "memory_pressure", "rank_crashed", "rank_straggler", "sync_imbalance"),
        subject={"rank": 3, "gpu_index": 3},
        job={"logs": True},
        defined_after_s=240.0,
        after_kill=True,
    ),
    _scenario(
        "rank_crashed",
        "A job started by srun, a task per GPU: a worker of rank 1's data loader dies (a bus error, /dev/shm full), "
        "rank 1 raises RuntimeError and exits; the other ranks wait for it in the next all-reduce.",
        Effect("rank_exit", 1.0, gpus=(1,)),
        cause="rank_failure",
        duration_s=200.0,
        allowed=("training_stalled",),
        subject={"rank": 1, "hostname": "node-000"},
        job={"logs": True, "launcher": "srun"},
    ),
)

#: Every scenario by name; ``healthy`` plus one per contract signal (and extras).
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _CATALOGUE}


def get_scenario(name: str) -> Scenario:
    """The named scenario, or a ValueError that lists the known names."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
