"""What is left: low MFU, idle GPUs or lost throughput that no other rule explains."""

from __future__ import annotations

from ..correlate import Evidence
from ..detectors.llm import LOW_MFU, MFU
from ..detectors.throughput import GPU_UNDERUTILIZATION, THROUGHPUT_COLLAPSE
from ..spec import COMPUTE, CauseSpec
from .common import CORROBORATED, SYMPTOM_ONLY, symptoms
from .ranking import Candidate, Rule

COMPUTE_INEFFICIENCY = CauseSpec(
    "compute_inefficiency",
    "low MFU, idle GPUs or lost throughput that no other cause explains: launch-bound or slow kernels",
    COMPUTE,
    (LOW_MFU.name, GPU_UNDERUTILIZATION.name, THROUGHPUT_COLLAPSE.name),
    "profile a step (torch.profiler): cut host overhead, fix or fuse the slow kernels",
)


def inefficiency(ev: Evidence) -> list[Candidate]:
    """Low MFU, idle GPUs or lost throughput that no other cause accounts for — by signal, or by lost compute
    time that no other cause claims (a checkpoint explains idle GPUs, not slower steps between saves)."""
    compute_unclaimed = "compute" in ev.unclaimed
    left = [s for s in symptoms(ev, *COMPUTE_INEFFICIENCY.explains) if compute_unclaimed or id(s) not in ev.explained]
    if not left:
        return []
    names = {s.name for s in left}
    under = ev.job_signal(GPU_UNDERUTILIZATION.name)
    if GPU_UNDERUTILIZATION.name in names and under is not None:
        util = under.evidence.get("median_utilization_percent", 0.0)
        summary = (
            f"GPUs run kernels only {util:.0f}% of the time with no input, communication, checkpoint or "
            "pipeline wait to explain it: the host cannot launch work fast enough (launch-bound)"
        )
        remedy = (
            "Cut per-step host overhead: larger micro-batches, CUDA graphs or torch.compile "
            "(mode='reduce-overhead'), fewer tiny kernels and fewer .item()/synchronising calls, no "
            "per-step Python logging; profile a step with torch.profiler to see the gaps."
        )
        base = CORROBORATED
    elif LOW_MFU.name in names:
        mfu = ev.fact(MFU)
        summary = (
            (
                f"MFU is {mfu:.2f} while the GPUs are busy: the kernels themselves are slow (unfused "
                "operations, fp32 matmuls, no FlashAttention)"
            )
            if mfu is not None
            else left[0].message
        )
        remedy = (
            "Profile a step (torch.profiler) and fix the slow kernels: bf16 autocast with tensor cores "
            "(TF32 for fp32), FlashAttention, fused optimizers and norms, torch.compile."
        )
        base = CORROBORATED
    else:
        summary = f"{left[0].message}, with no wait, throttling or straggler to explain it"
        remedy = (
            "Compare a torch.profiler trace from before and after the drop: new or recompiled kernels, "
            "changed batch shapes, a slower code path."
        )
        base = SYMPTOM_ONLY
    return [Candidate(COMPUTE_INEFFICIENCY.name, base, summary, remedy, left)]


RESIDUAL = Rule(COMPUTE_INEFFICIENCY, inefficiency, residual=True)
