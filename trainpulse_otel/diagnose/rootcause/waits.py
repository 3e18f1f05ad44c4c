"""Rules about the step's time: waits on input, tokenization, communication, checkpoints, the
pipeline schedule, and compute spent on padding."""

from __future__ import annotations

from collections.abc import Callable

from ..correlate import Evidence
from .ranking import Candidate, Rule, base_confidence, pct, symptoms


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
        explains = symptoms(ev, "gpu_underutilization", "throughput_collapse")
        share = next((v for k, v in s.evidence.items() if k.endswith("_share")), None)
        if inside_step and ev.explains_mfu(share):
            explains += symptoms(ev, "low_mfu")
        summary = s.message + _consequence(ev)
        return [Candidate(cause, base_confidence([s]), summary, remedy(ev), [s], explains)]

    rule.__name__ = cause
    return rule


def _consequence(ev: Evidence) -> str:
    under = ev.job_signal("gpu_underutilization")
    drop = ev.fact("throughput_drop")
    parts = []
    if under is not None:
        parts.append(f"GPUs busy only {under.evidence.get('median_utilization_percent', 0):.0f}% of the time")
    if drop is not None and drop >= 0.1:
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
    out = _waiting("checkpoint_io_bound", "checkpoint_stall", _checkpoint_remedy, inside_step=False)(ev)
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
    explains = symptoms(ev, "throughput_collapse")
    summary = s.message
    if ev.explains_mfu(waste):
        explains += symptoms(ev, "low_mfu")
        summary += (
            f": MFU {ev.fact('low_mfu'):.2f} counts real tokens only; without the padding it would "
            f"be ~{ev.mfu_without(waste):.2f}"
        )
    remedy = (
        "Pack sequences (concatenate documents with per-document attention masks or position resets, "
        "e.g. Hugging Face DataCollatorWithFlattening), or bucket by length and pad to each batch's "
        "longest sequence; padding-free (varlen) FlashAttention skips pads entirely."
    )
    return [Candidate("padding_waste", base_confidence([s], 0.65, 0.8), summary, remedy, [s], explains)]


INPUT_PIPELINE = Rule("input_pipeline_bound", _waiting("input_pipeline_bound", "dataloader_starvation", _input_remedy))
TOKENIZER = Rule("tokenizer_bound", _waiting("tokenizer_bound", "tokenizer_stall", _tokenizer_remedy))
COMMUNICATION = Rule("communication_bound", _waiting("communication_bound", "allreduce_wait", _comm_remedy))
CHECKPOINT = Rule("checkpoint_io_bound", checkpoint)
PIPELINE_BUBBLES = Rule("pipeline_bubbles", _waiting("pipeline_bubbles", "pipeline_bubble", _bubble_remedy))
PADDING = Rule("padding_waste", padding)
