"""Root-cause inference: the contract's causes, ranked, deepest explanation first.

Each rule looks at the active signals and the cross-layer :class:`Evidence`
and proposes candidates: a cause, the signals that are its direct evidence
(*primary*), the signals it accounts for as consequences (*explains*), a
subject, a summary with the numbers, and what to do.

Ranking: a candidate starts from its own evidence (0.55–0.85, higher when
the signals are critical or a cross-layer check confirms it) and gains 0.05
for each consequence it explains, up to 0.95. A candidate whose primary
signal another candidate explains is a consequence itself and ends at least
0.1 below it: a thermally throttled GPU that makes its rank a straggler is
``gpu_thermal_throttling`` first and ``straggler_rank`` second; padding that
accounts for low MFU means ``compute_inefficiency`` is not proposed at all,
since that cause is only inferred for low MFU, idle GPUs or lost throughput
that nothing else explains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .correlate import Evidence
from .tick import NodeState
from .types import CRITICAL, RootCause, Signal

MAX_CONFIDENCE = 0.95
PER_EXPLAINED = 0.05
BELOW_EXPLAINER = 0.10
MAX_CAUSES = 6
#: The job-wide symptoms a deeper cause may account for.
SYMPTOMS = ("throughput_collapse", "gpu_underutilization", "low_mfu", "sync_imbalance")


@dataclass
class Candidate:
    """A proposed cause before ranking."""

    cause: str
    base: float
    summary: str
    remediation: str
    primary: list[Signal]
    explains: list[Signal] = field(default_factory=list)
    subject: dict[str, Any] = field(default_factory=dict)
    confidence: float = 0.0


def _base(signals: Iterable[Signal], warning: float = 0.6, critical: float = 0.75) -> float:
    return critical if any(s.severity == CRITICAL for s in signals) else warning


def _symptoms(ev: Evidence, *names: str) -> list[Signal]:
    """The active job-wide symptom signals among ``names`` (all SYMPTOMS by default)."""
    return [s for s in (ev.job_signal(n) for n in (names or SYMPTOMS)) if s is not None]


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.0f}%"


# ---------------------------------------------------------------- hardware


REMEDY_THERMAL = (
    "Check GPU {gpu}'s cooling: fan speeds, inlet/exhaust temperatures and airflow "
    "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE; BMC/ipmitool sensors), a failed fan or cold plate. "
    "Drain the node for service; until then cap that GPU's power (nvidia-smi -i {gpu} -pl <watts>) "
    "to stop the throttle cycling, or move the job off the node."
)


def thermal(ev: Evidence) -> list[Candidate]:
    """A GPU overheating: throttling, heating fast, or forecast to reach its throttle point."""
    by_gpu = ev.gpu_signals("thermal_instability", "thermal_throttle_risk")
    for s in ev.active("rank_straggler"):
        g = ev.local_gpu_of(s)
        if g is not None and ev.thermally_throttled(g):
            by_gpu.setdefault(g, [])
    if len(by_gpu) >= 2 and 2 * len(by_gpu) >= len(ev.node.gpus):
        return [_node_thermal(ev, by_gpu)]
    out = []
    for g, signals in by_gpu.items():
        throttled = ev.thermally_throttled(g)
        stragglers = ev.stragglers_on(g)
        explains = stragglers + (_symptoms(ev) if stragglers else [])
        if throttled:
            base = 0.85 if stragglers else 0.75
        else:
            base = 0.65 if any(s.name == "thermal_instability" for s in signals) else 0.6
        out.append(Candidate("gpu_thermal_throttling", base, _thermal_summary(ev, g, signals, stragglers),
                             REMEDY_THERMAL.format(gpu=g), signals, explains, ev.gpu_subject([g])))
    return out


REMEDY_NODE_THERMAL = (
    "Check the node's and the room's cooling, not one GPU: inlet air temperature, fans and airflow "
    "(ipmitool sensor, the BMC), blanking panels and cabling in the rack, the CRAC/CDU or liquid-cooling loop. "
    "Move the job off the node if it cannot be fixed before the GPUs throttle."
)


def _node_thermal(ev: Evidence, by_gpu: dict[int, list[Signal]]) -> Candidate:
    """Most of the node's GPUs overheating together: the node's or the room's cooling."""
    signals = [s for group in by_gpu.values() for s in group]
    throttled = [g for g in by_gpu if ev.thermally_throttled(g)]
    stragglers = [s for g in by_gpu for s in ev.stragglers_on(g)]
    temps = [ev.node.gpus[g].temp for g in by_gpu if g in ev.node.gpus and ev.node.gpus[g].temp is not None]
    detail = [f"up to {max(temps):.0f} °C"] if temps else []  # type: ignore[type-var]
    if throttled:
        detail.append(f"{len(throttled)} throttling")
    summary = f"{len(by_gpu)} of {len(ev.node.gpus)} GPUs overheat together" + \
              (f" ({', '.join(detail)})" if detail else "") + ": the node's cooling, not one GPU's"
    explains = stragglers + (_symptoms(ev) if throttled else [])
    return Candidate("gpu_thermal_throttling", 0.75 if throttled else 0.65, summary, REMEDY_NODE_THERMAL, signals,
                     explains, ev.gpu_subject(by_gpu))


def _thermal_summary(ev: Evidence, g: int, signals: list[Signal], stragglers: list[Signal]) -> str:
    state = ev.gpu(g)
    temp = f" at {state.temp:.0f} °C" if state is not None and state.temp is not None else ""
    if ev.thermally_throttled(g):
        clock = f", SM clock at {_pct(state.clock_ratio)} of max" if state and state.clock_ratio else ""
        text = f"GPU {g} overheats and throttles{temp}{clock}"
    else:
        risk = next((s for s in signals if s.name == "thermal_throttle_risk"), None)
        eta = risk.evidence.get("eta_s") if risk is not None else None
        text = f"GPU {g} overheats{temp}" + (f" and will reach its throttle point in ~{eta / 60:.0f} min"
                                             if eta is not None else " far above its peers")
    if stragglers:
        s = stragglers[0]
        text += f"; rank {s.subject.get('rank')} on it is {_pct(s.evidence.get('slower_than_median'))} slower " \
                "than the median rank and the others wait for it"
    return text


REMEDY_POWER = (
    "Restore the GPUs' power limit (nvidia-smi -q -d POWER shows the enforced and default limits; "
    "nvidia-smi -pl, or the DCGM/cluster power-capping policy that set it) and check the rack's power "
    "budget and BMC power-brake events. If the cap is intended, expect throughput to scale down with it."
)


def power(ev: Evidence) -> list[Candidate]:
    """Power limits holding clocks down: job-wide (throughput falls) or on one straggler's GPU."""
    gpus = list(ev.node.gpus)
    capped = ev.power_throttled_gpus()
    out = []
    symptoms = _symptoms(ev, "throughput_collapse", "low_mfu", "gpu_underutilization")
    if gpus and 2 * len(capped) >= len(gpus) and symptoms:
        cut = max(ev.power_limit_cut(g) for g in capped)
        base = 0.8 if cut >= 0.1 else 0.7
        limit = ev.gpu(capped[0])
        summary = (f"{len(capped)} of {len(gpus)} GPUs are held by their power limit (sw_power_cap)"
                   + (f" of {limit.limit:.0f} W, {_pct(cut)} below the earlier {limit.limit_max:.0f} W"
                      if limit is not None and limit.limit and cut >= 0.1 else "")
                   + f": SM clocks at {_pct(ev.median_clock_ratio(capped))} of max")
        drop = ev.fact("throughput_drop")
        if drop is not None and drop > 0.05:
            summary += f", throughput down {_pct(drop)}"
        explains = symptoms + _symptoms(ev, "sync_imbalance")
        out.append(Candidate("gpu_power_throttling", base, summary, REMEDY_POWER, [], explains,
                             {"gpu_indices": sorted(capped)}))
        return out
    for s in ev.active("rank_straggler"):
        g = ev.local_gpu_of(s)
        if g is not None and g in capped and not ev.thermally_throttled(g):
            summary = f"GPU {g} alone is held by its power limit (clocks at {_pct(ev.gpu(g).clock_ratio)}), " \
                      f"so rank {s.subject.get('rank')} on it is the straggler"  # type: ignore[union-attr]
            out.append(Candidate("gpu_power_throttling", 0.75, summary, REMEDY_POWER, [],
                                 [s, *_symptoms(ev)], ev.gpu_subject([g])))
    return out


REMEDY_GPU_LEAK = (
    "Something on rank {rank} keeps GPU tensors alive across steps: accumulated losses or outputs "
    "without .detach()/.item(), growing lists of tensors, hooks or closures holding graphs. Log "
    "torch.cuda.memory_allocated() per step and take a torch.cuda.memory._snapshot() to find the "
    "allocation site; restart from the last checkpoint before it runs out."
)
REMEDY_GPU_FULL = (
    "Give the allocator headroom: a smaller micro-batch with more gradient accumulation, activation "
    "checkpointing, FSDP/ZeRO sharding of optimizer state, and "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation."
)


def gpu_memory(ev: Evidence) -> list[Candidate]:
    """GPU memory nearly full or forecast to run out."""
    by_gpu = ev.gpu_signals("memory_pressure", "oom_risk")
    if not by_gpu:
        return []
    signals = [s for group in by_gpu.values() for s in group]
    stragglers = [s for g in by_gpu for s in ev.stragglers_on(g)]
    explains = stragglers + _symptoms(ev, "throughput_collapse", "sync_imbalance")
    subject = ev.gpu_subject(by_gpu)
    forecast = min((s for s in signals if s.name == "oom_risk"), key=lambda s: s.evidence.get("eta_s", 1e9),
                   default=None)
    where = f"GPU {min(by_gpu)} memory" if len(by_gpu) == 1 else f"memory of {len(by_gpu)} GPUs"
    if forecast is not None:
        gpu = ev.gpu(int(forecast.subject["gpu_index"]))
        summary = _forecast_summary(where, forecast, "the device", gpu.mem_frac if gpu is not None else None)
        remedy = REMEDY_GPU_LEAK.format(rank=subject.get("rank", "?")) if len(by_gpu) == 1 else REMEDY_GPU_FULL
    else:
        fracs = [s.evidence.get("used_fraction") for s in signals if s.evidence.get("used_fraction") is not None]
        summary = f"{where} is {_pct(max(fracs) if fracs else None)} full: the allocator is at its limit " \
                  "and stalls on retries before it fails"
        remedy = REMEDY_GPU_FULL
    return [Candidate("gpu_memory_pressure", _base(signals, 0.65, 0.8), summary, remedy, signals, explains,
                      subject)]


def _forecast_summary(where: str, forecast: Signal, of: str, used: float | None) -> str:
    """What an ``oom_risk`` forecast says: how fast memory goes and when it runs out (or that it did)."""
    if forecast.evidence.get("eta_s") == 0.0:
        return f"{where} ran out and training stopped ({forecast.message})"
    rate = abs(forecast.evidence.get("rate_fraction_per_s", 0.0))
    text = f"{where} is used up at {100 * rate * 60:.1f}% of {of} a minute and runs out in " \
           f"~{forecast.evidence.get('eta_s', 0.0) / 60:.0f} min"
    return text + (f" ({_pct(used)} in use)" if used is not None else "")


REMEDY_HOST_MEMORY = (
    "Find the process whose resident memory grows (ps/smem over time, /proc/<pid>/status) — usually the "
    "data loader: caches or lists that grow every iteration, per-worker copies of Python objects, pinned "
    "buffers. Bound the caches, fix the leak, and restart from the last checkpoint before the OOM killer "
    "ends the job."
)


def host_memory(ev: Evidence) -> list[Candidate]:
    """Host memory running low or forecast to run out."""
    signals = ev.host_signals("memory_pressure", "oom_risk")
    if not signals:
        return []
    forecast = next((s for s in signals if s.name == "oom_risk"), None)
    available = ev.node.host.available_frac
    if forecast is not None:
        summary = _forecast_summary("host memory", forecast, "the total", None if available is None else 1 - available)
    else:
        summary = f"host memory is nearly exhausted: {_pct(available)} available"
    explains = _symptoms(ev, "throughput_collapse")
    return [Candidate("host_memory_pressure", _base(signals, 0.65, 0.8), summary, REMEDY_HOST_MEMORY, signals,
                      explains, dict(signals[0].subject))]


# ---------------------------------------------------------------- ranks


REMEDY_STRAGGLER = (
    "Find what slows rank {rank} on {host}: CPU contention or a noisy neighbour on its cores (top, pidstat, "
    "cgroup CPU limits), the process's CPU/NUMA affinity, its data-loader workers, PCIe/NVLink health "
    "(nvidia-smi topo -m, dmesg for Xid errors). If it persists, cordon the node and restart from the last "
    "checkpoint without it."
)


def straggler(ev: Evidence) -> list[Candidate]:
    """One rank persistently late, the others waiting for it."""
    out = []
    for s in ev.active("rank_straggler"):
        rank = s.subject.get("rank")
        g = ev.local_gpu_of(s)
        host = s.evidence.get("hostname") or ev.node.hostname or "its host"
        summary = s.message
        if g is not None:
            utils = ev.util_vs_peers(g)
            if ev.thermally_throttled(g) or ev.power_throttled(g):
                summary += f"; its GPU {g} is throttled"
            elif utils is not None and utils[0] < utils[1] - 3.0:
                summary += f"; its GPU {g} is not throttled but idles more than its peers " \
                           f"({utils[0]:.0f}% vs {utils[1]:.0f}% busy): the rank's host-side work is slow"
        out.append(Candidate("straggler_rank", _base([s]), summary, REMEDY_STRAGGLER.format(rank=rank, host=host),
                             [s], _symptoms(ev, "sync_imbalance", "throughput_collapse", "gpu_underutilization"),
                             dict(s.subject)))
    return out


REMEDY_IMBALANCE = (
    "Give every rank the same amount of work per step: pack or bucket sequences by length so ranks get "
    "similar token counts, use a token-budget sampler for variable-length data; for MoE models check "
    "expert load balancing (auxiliary loss, capacity factor)."
)


def imbalance(ev: Evidence) -> list[Candidate]:
    """Ranks wait for each other but no single rank is to blame: the work per rank varies."""
    sync = ev.job_signal("sync_imbalance")
    if sync is None or ev.has("rank_straggler"):
        return []
    summary = f"{sync.message}, yet no rank is consistently the late one: the work per rank differs step to step"
    return [Candidate("load_imbalance", _base([sync]), summary, REMEDY_IMBALANCE, [sync],
                      _symptoms(ev, "throughput_collapse", "gpu_underutilization"))]


# ---------------------------------------------------------------- the step's time


def _waiting(cause: str, signal: str, remedy: Callable[[Evidence], str], base: float = 0.0) -> Callable:
    """A cause whose evidence is one job-wide signal about time lost per step."""

    def rule(ev: Evidence) -> list[Candidate]:
        s = ev.job_signal(signal)
        if s is None:
            return []
        explains = _symptoms(ev, "gpu_underutilization", "throughput_collapse")
        share = next((v for k, v in s.evidence.items() if k.endswith("_share")), None)
        if ev.explains_mfu(share):
            explains += _symptoms(ev, "low_mfu")
        summary = s.message + _consequence(ev)
        return [Candidate(cause, base or _base([s]), summary, remedy(ev), [s], explains)]

    rule.__name__ = cause
    return rule


def _consequence(ev: Evidence) -> str:
    under = ev.job_signal("gpu_underutilization")
    drop = ev.fact("throughput_drop")
    parts = []
    if under is not None:
        parts.append(f"GPUs busy only {under.evidence.get('median_utilization_percent', 0):.0f}% of the time")
    if drop is not None and drop >= 0.1:
        parts.append(f"throughput down {_pct(drop)}")
    return f" ({'; '.join(parts)})" if parts else ""


def _input_remedy(ev: Evidence) -> str:
    cpu = ev.host_cpu()
    if ev.cpu_bound():
        return (f"The host CPUs are saturated ({cpu:.0f}%): the loader workers are CPU-bound. Move decoding, "
                "augmentation and tokenization offline (pre-processed, pre-tokenized shards), use a faster "
                "loader (NVIDIA DALI, WebDataset), and keep other processes off the job's cores; more "
                "num_workers helps only if cores are free.")
    return ("The loader waits on storage: raise num_workers and prefetch_factor, enable pin_memory and "
            "persistent_workers, stage the data on local NVMe or stream large shards (WebDataset, "
            "MosaicML streaming), and check the storage's throughput and latency.")


def _tokenizer_remedy(_: Evidence) -> str:
    return ("Tokenize ahead of time (pre-tokenized, packed shards), or tokenize inside the DataLoader workers "
            "with a fast batched tokenizer (Hugging Face tokenizers, TOKENIZERS_PARALLELISM) so the step "
            "never waits for it.")


def _comm_remedy(_: Evidence) -> str:
    return ("Check which transport NCCL uses (NCCL_DEBUG=INFO: NVLink/NVSwitch or InfiniBand vs a PCIe or "
            "socket fallback; a stray NCCL_P2P_DISABLE or NCCL_IB_DISABLE), link health (nvidia-smi nvlink -s, "
            "ibstat and error counters), and overlap the all-reduce with the backward pass (DDP bucket_cap_mb, "
            "FSDP/ZeRO overlap_comm); more gradient accumulation means fewer all-reduces per sample.")


def _checkpoint_remedy(_: Evidence) -> str:
    return ("Save asynchronously (torch.distributed.checkpoint async_save, NVIDIA resiliency-ext async "
            "checkpointing, Megatron/DeepSpeed distributed checkpoints), write shards from every rank to fast "
            "local storage and upload in the background, or checkpoint less often.")


def _bubble_remedy(_: Evidence) -> str:
    return ("Run many more micro-batches per step than pipeline stages (raise gradient accumulation or lower "
            "the micro-batch size), use an interleaved 1F1B schedule (Megatron "
            "--num-layers-per-virtual-pipeline-stage), or use fewer pipeline stages and more tensor/data "
            "parallelism.")


def checkpoint(ev: Evidence) -> list[Candidate]:
    """Blocking checkpoint saves, with the disk writes that show them."""
    out = _waiting("checkpoint_io_bound", "checkpoint_stall", _checkpoint_remedy)(ev)
    surge = ev.fact("checkpoint_write_surge")
    for c in out:
        if surge is not None and surge >= 3.0:
            c.summary += f"; the disk writes at {surge:.0f}x its normal rate while training waits"
            c.base += 0.05
    return out


def padding(ev: Evidence) -> list[Candidate]:
    """Padding tokens: compute spent on nothing, which alone may explain a low MFU."""
    s = ev.job_signal("sequence_padding")
    if s is None:
        return []
    waste = s.evidence.get("padding_ratio")
    explains = _symptoms(ev, "throughput_collapse")
    summary = s.message
    if ev.explains_mfu(waste):
        explains += _symptoms(ev, "low_mfu")
        summary += f": MFU {ev.fact('low_mfu'):.2f} counts real tokens only; without the padding it would " \
                   f"be ~{ev.mfu_without(waste):.2f}"
    remedy = ("Pack sequences (concatenate documents with per-document attention masks or position resets, "
              "e.g. Hugging Face DataCollatorWithFlattening), or bucket by length and pad to each batch's "
              "longest sequence; padding-free (varlen) FlashAttention skips pads entirely.")
    return [Candidate("padding_waste", _base([s], 0.65, 0.8), summary, remedy, [s], explains)]


# ---------------------------------------------------------------- what is left


def inefficiency(ev: Evidence, explained: set[int]) -> list[Candidate]:
    """Low MFU, idle GPUs or lost throughput that no other cause accounts for."""
    left = [s for s in _symptoms(ev, "low_mfu", "gpu_underutilization", "throughput_collapse")
            if id(s) not in explained]
    if not left:
        return []
    names = {s.name for s in left}
    under = ev.job_signal("gpu_underutilization")
    if "gpu_underutilization" in names and under is not None:
        util = under.evidence.get("median_utilization_percent", 0.0)
        summary = (f"GPUs run kernels only {util:.0f}% of the time with no input, communication, checkpoint or "
                   "pipeline wait to explain it: the host cannot launch work fast enough (launch-bound)")
        remedy = ("Cut per-step host overhead: larger micro-batches, CUDA graphs or torch.compile "
                  "(mode='reduce-overhead'), fewer tiny kernels and fewer .item()/synchronising calls, no "
                  "per-step Python logging; profile a step with torch.profiler to see the gaps.")
        base = 0.65
    elif "low_mfu" in names:
        mfu = ev.fact("low_mfu")
        summary = (f"MFU is {mfu:.2f} while the GPUs are busy: the kernels themselves are slow (unfused "
                   "operations, fp32 matmuls, no FlashAttention)") if mfu is not None else left[0].message
        remedy = ("Profile a step (torch.profiler) and fix the slow kernels: bf16 autocast with tensor cores "
                  "(TF32 for fp32), FlashAttention, fused optimizers and norms, torch.compile.")
        base = 0.65
    else:
        summary = f"{left[0].message}, with no wait, throttling or straggler to explain it"
        remedy = ("Compare a torch.profiler trace from before and after the drop: new or recompiled kernels, "
                  "changed batch shapes, a slower code path.")
        base = 0.45
    return [Candidate("compute_inefficiency", base, summary, remedy, left)]


RULES: tuple[Callable[[Evidence], list[Candidate]], ...] = (
    thermal,
    power,
    gpu_memory,
    host_memory,
    straggler,
    imbalance,
    _waiting("input_pipeline_bound", "dataloader_starvation", _input_remedy),
    _waiting("tokenizer_bound", "tokenizer_stall", _tokenizer_remedy),
    _waiting("communication_bound", "allreduce_wait", _comm_remedy),
    checkpoint,
    _waiting("pipeline_bubbles", "pipeline_bubble", _bubble_remedy),
    padding,
)


def rank_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """Score, demote the consequences below what explains them, and sort."""
    explainers: dict[int, list[Candidate]] = {}
    for c in candidates:
        c.confidence = min(MAX_CONFIDENCE, c.base + PER_EXPLAINED * len({id(s) for s in c.explains}))
        for s in c.explains:
            explainers.setdefault(id(s), []).append(c)
    for c in candidates:
        deeper = [o for s in c.primary for o in explainers.get(id(s), ()) if o is not c]
        if deeper:
            c.confidence = max(0.05, min(c.confidence, max(o.confidence for o in deeper) - BELOW_EXPLAINER))
    return sorted(candidates, key=lambda c: -c.confidence)


def infer_root_causes(signals: tuple[Signal, ...], facts: Mapping[str, Any], node: NodeState,
                      ts: float) -> tuple[RootCause, ...]:
    """The ranked root causes for the active signals (empty when none are active)."""
    if not signals:
        return ()
    ev = Evidence(signals, facts, node, ts)
    candidates = [c for rule in RULES for c in rule(ev)]
    explained = {id(s) for c in candidates for s in c.explains}
    candidates += inefficiency(ev, explained)
    ranked = rank_candidates(candidates)[:MAX_CAUSES]
    return tuple(_to_root_cause(c) for c in ranked)


def _to_root_cause(c: Candidate) -> RootCause:
    names: list[str] = []
    for s in (*c.primary, *c.explains):
        if s.name not in names:
            names.append(s.name)
    return RootCause(cause=c.cause, confidence=c.confidence, summary=c.summary, signals=tuple(names),
                     subject=dict(c.subject), remediation=c.remediation)
