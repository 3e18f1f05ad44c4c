"""Rules about the ranks: one rank the others wait for, or work spread unevenly over them."""

from __future__ import annotations

from ..correlate import Evidence
from .ranking import Candidate, Rule, base_confidence, symptoms

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
                summary += (
                    f"; its GPU {g} is not throttled but idles more than its peers "
                    f"({utils[0]:.0f}% vs {utils[1]:.0f}% busy): the rank's host-side work is slow"
                )
        out.append(
            Candidate(
                "straggler_rank",
                base_confidence([s]),
                summary,
                REMEDY_STRAGGLER.format(rank=rank, host=host),
                [s],
                symptoms(ev, "sync_imbalance", "throughput_collapse", "gpu_underutilization"),
                dict(s.subject),
            )
        )
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
    return [
        Candidate(
            "load_imbalance",
            base_confidence([sync]),
            summary,
            REMEDY_IMBALANCE,
            [sync],
            symptoms(ev, "throughput_collapse", "gpu_underutilization"),
        )
    ]


STRAGGLER = Rule("straggler_rank", straggler)
IMBALANCE = Rule("load_imbalance", imbalance)
