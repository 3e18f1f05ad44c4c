"""What is left: low MFU, idle GPUs or lost throughput that no other rule explains."""

from __future__ import annotations

from ..correlate import Evidence
from .ranking import Candidate, Rule, symptoms


def inefficiency(ev: Evidence) -> list[Candidate]:
    """Low MFU, idle GPUs or lost throughput that no other cause accounts for — by signal, or by lost compute
    time that no other cause claims (a checkpoint explains idle GPUs, not slower steps between saves)."""
    compute_unclaimed = "compute" in ev.unclaimed
    left = [
        s
        for s in symptoms(ev, "low_mfu", "gpu_underutilization", "throughput_collapse")
        if compute_unclaimed or id(s) not in ev.explained
    ]
    if not left:
        return []
    names = {s.name for s in left}
    under = ev.job_signal("gpu_underutilization")
    if "gpu_underutilization" in names and under is not None:
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
        base = 0.65
    elif "low_mfu" in names:
        mfu = ev.fact("low_mfu")
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
        base = 0.65
    else:
        summary = f"{left[0].message}, with no wait, throttling or straggler to explain it"
        remedy = (
            "Compare a torch.profiler trace from before and after the drop: new or recompiled kernels, "
            "changed batch shapes, a slower code path."
        )
        base = 0.45
    return [Candidate("compute_inefficiency", base, summary, remedy, left)]


COMPUTE_INEFFICIENCY = Rule("compute_inefficiency", inefficiency, residual=True)
