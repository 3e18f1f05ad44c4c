"""Rules about the step's time: waits on input, tokenization, communication, checkpoints, the
pipeline schedule, and compute spent on padding."""

from __future__ import annotations

from collections.abc import Callable

from ..correlate import Evidence
from ..detectors.comms import ALLREDUCE_WAIT
from ..detectors.inputs import DATALOADER_STARVATION, TOKENIZER_STALL
from ..detectors.llm import LOW_MFU, MFU, SEQUENCE_PADDING
from ..detectors.schedule import CHECKPOINT_STALL, CHECKPOINT_WRITE_SURGE, PIPELINE_BUBBLE
from ..detectors.throughput import GPU_UNDERUTILIZATION, THROUGHPUT_COLLAPSE, THROUGHPUT_DROP
from ..spec import STEP, CauseSpec
from .common import CORROBORATED, STRONG, base_confidence, pct, symptoms
from .ranking import Candidate, Rule

#: A throughput drop worth naming beside a wait.
NOTABLE_DROP = 0.10
#: Evidence strength the disk's surge of writes adds to blocking saves (a cross-layer confirmation).
SURGE_CONFIRMS = 0.05
#: What a wait's candidate can explain beside its own signal.
_CONSEQUENCES = (GPU_UNDERUTILIZATION.name, THROUGHPUT_COLLAPSE.name, LOW_MFU.name)


def _wait_cause(name: str, signal: str, meaning: str, books: str, remediation: str) -> CauseSpec:
    return CauseSpec(name, meaning, STEP, (signal, *_CONSEQUENCES), remediation, books=books, wait=True)


INPUT_PIPELINE_BOUND = _wait_cause(
    "input_pipeline_bound",
    DATALOADER_STARVATION.name,
    "the step waits for its input: a CPU-bound or storage-bound data loader",
    "data",
    "pre-process offline and give the loader free cores, or more workers and faster storage",
)
TOKENIZER_BOUND = _wait_cause(
    "tokenizer_bound",
    TOKENIZER_STALL.name,
    "the step waits for on-the-fly tokenization",
    "tokenizer",
    "tokenize ahead of time, or inside the loader's workers with a fast batched tokenizer",
)
COMMUNICATION_BOUND = _wait_cause(
    "communication_bound",
    ALLREDUCE_WAIT.name,
    "the gradient all-reduce is slow on every rank: a degraded or fallback transport",
    "all_reduce",
    "check NCCL's transport and the links; overlap the all-reduce with the backward pass",
)
CHECKPOINT_IO_BOUND = _wait_cause(
    "checkpoint_io_bound",
    CHECKPOINT_STALL.name,
    "training blocks while checkpoints are written",
    "checkpoint",
    "save asynchronously to fast local storage, or checkpoint less often",
)
PIPELINE_BUBBLES = _wait_cause(
    "pipeline_bubbles",
    PIPELINE_BUBBLE.name,
    "pipeline stages idle while the schedule fills and drains",
    "bubble",
    "more micro-batches per step than stages, an interleaved schedule, or fewer stages",
)
PADDING_WASTE = CauseSpec(
    "padding_waste",
    "compute spent on padding tokens",
    STEP,
    (SEQUENCE_PADDING.name, THROUGHPUT_COLLAPSE.name, LOW_MFU.name),
    "pack sequences, or bucket by length; padding-free attention skips pads",
)


def _waiting(
    cause: str, signal: str, remedy: Callable[[Evidence], str], inside_step: bool = True
) -> Callable[[Evidence], list[Candidate]]:
    """A cause whose evidence is one job-wide signal about time lost per step.

    A wait inside the step (``inside_step``) lowers the step's MFU by its share, so it may explain a low MFU;
    a save between steps leaves each step's MFU as it was (only the step that ends it is slow, and the median
    over reports does not see it), so it never does.
    """

    def rule(ev: Evidence) -> list[Candidate]:
        s = ev.job_signal(signal)
        if s is None:
            return []
        explains = symptoms(ev, GPU_UNDERUTILIZATION.name, THROUGHPUT_COLLAPSE.name)
        share = next((v for k, v in s.evidence.items() if k.endswith("_share")), None)
        if inside_step and ev.explains_mfu(share):
            explains += symptoms(ev, LOW_MFU.name)
        summary = s.message + _consequence(ev)
        return [Candidate(cause, base_confidence([s]), summary, remedy(ev), [s], explains)]

    rule.__name__ = cause
    return rule


def _consequence(ev: Evidence) -> str:
    under = ev.job_signal(GPU_UNDERUTILIZATION.name)
    drop = ev.fact(THROUGHPUT_DROP)
    parts = []
    if under is not None:
        parts.append(f"GPUs busy only {under.evidence.get('median_utilization_percent', 0):.0f}% of the time")
    if drop is not None and drop >= NOTABLE_DROP:
        parts.append(f"throughput down {pct(drop)}")
    return f" ({'; '.join(parts)})" if parts else ""


def _input_remedy(ev: Evidence) -> str:
    cpu = ev.host_cpu()
    if ev.cpu_bound():
        return (
            f"The host CPUs are saturated ({cpu:.0f}%): the loader workers are CPU-bound. Move decoding, "
            "augmentation and tokenization offline (pre-processed, pre-tokenized shards), use a faster "
            "loader (NVIDIA DALI, WebDataset), and keep other processes off the job's cores; more "
            "num_workers helps only if cores are free."
        )
    return (
        "The loader waits on storage: raise num_workers and prefetch_factor, enable pin_memory and "
        "persistent_workers, stage the data on local NVMe or stream large shards (WebDataset, "
        "MosaicML streaming), and check the storage's throughput and latency."
    )


def _tokenizer_remedy(_: Evidence) -> str:
    return (
        "Tokenize ahead of time (pre-tokenized, packed shards), or tokenize inside the DataLoader workers "
        "with a fast batched tokenizer (Hugging Face tokenizers, TOKENIZERS_PARALLELISM) so the step "
        "never waits for it."
    )


def _comm_remedy(_: Evidence) -> str:
    return (
        "Check which transport NCCL uses (NCCL_DEBUG=INFO: NVLink/NVSwitch or InfiniBand vs a PCIe or "
        "socket fallback; a stray NCCL_P2P_DISABLE or NCCL_IB_DISABLE), link health (nvidia-smi nvlink -s, "
        "ibstat and error counters), and overlap the all-reduce with the backward pass (DDP bucket_cap_mb, "
        "FSDP/ZeRO overlap_comm); more gradient accumulation means fewer all-reduces per sample."
    )


def _checkpoint_remedy(_: Evidence) -> str:
    return (
        "Save asynchronously (torch.distributed.checkpoint async_save, NVIDIA resiliency-ext async "
        "checkpointing, Megatron/DeepSpeed distributed checkpoints), write shards from every rank to fast "
        "local storage and upload in the background, or checkpoint less often."
    )


def _bubble_remedy(_: Evidence) -> str:
    return (
        "Run many more micro-batches per step than pipeline stages (raise gradient accumulation or lower "
        "the micro-batch size), use an interleaved 1F1B schedule (Megatron "
        "--num-layers-per-virtual-pipeline-stage), or use fewer pipeline stages and more tensor/data "
        "parallelism."
    )


def checkpoint(ev: Evidence) -> list[Candidate]:
    """Blocking checkpoint saves, with the disk writes that show them."""
    out = _waiting(CHECKPOINT_IO_BOUND.name, CHECKPOINT_STALL.name, _checkpoint_remedy, inside_step=False)(ev)
    surge = ev.fact(CHECKPOINT_WRITE_SURGE)  # only ever set from a surge past checkpoint_stall.write_surge
    for c in out:
        if surge is not None:
            c.summary += f"; the disk writes at {surge:.0f}x its normal rate while training waits"
            c.base += SURGE_CONFIRMS
    return out


def padding(ev: Evidence) -> list[Candidate]:
    """Padding tokens: compute spent on nothing, which alone may explain a low MFU."""
    s = ev.job_signal(SEQUENCE_PADDING.name)
    if s is None:
        return []
    waste = s.evidence.get("padding_ratio")
    explains = symptoms(ev, THROUGHPUT_COLLAPSE.name)
    summary = s.message
    if ev.explains_mfu(waste):
        explains += symptoms(ev, LOW_MFU.name)
        summary += (
            f": MFU {ev.fact(MFU):.2f} counts real tokens only; without the padding it would "
            f"be ~{ev.mfu_without(waste):.2f}"
        )
    remedy = (
        "Pack sequences (concatenate documents with per-document attention masks or position resets, "
        "e.g. Hugging Face DataCollatorWithFlattening), or bucket by length and pad to each batch's "
        "longest sequence; padding-free (varlen) FlashAttention skips pads entirely."
    )
    return [Candidate(PADDING_WASTE.name, base_confidence([s], CORROBORATED, STRONG), summary, remedy, [s], explains)]


def _wait_rule(spec: CauseSpec, remedy: Callable[[Evidence], str]) -> Rule:
    """The rule of a cause whose own signal is its spec's first."""
    return Rule(spec, _waiting(spec.name, spec.explains[0], remedy))


INPUT_PIPELINE = _wait_rule(INPUT_PIPELINE_BOUND, _input_remedy)
TOKENIZER = _wait_rule(TOKENIZER_BOUND, _tokenizer_remedy)
COMMUNICATION = _wait_rule(COMMUNICATION_BOUND, _comm_remedy)
CHECKPOINT = Rule(CHECKPOINT_IO_BOUND, checkpoint)
PIPELINE = _wait_rule(PIPELINE_BUBBLES, _bubble_remedy)
PADDING = Rule(PADDING_WASTE, padding)
