"""Rules about the ranks: one rank the others wait for, or work spread unevenly over them."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

from ..correlate import Evidence
from ..detectors.comms import SYNC_IMBALANCE
from ..detectors.ranks import RANK_STRAGGLER
from ..detectors.throughput import GPU_UNDERUTILIZATION, THROUGHPUT_COLLAPSE
from ..spec import RANK, CauseSpec
from ..types import Signal
from .common import base_confidence, explain_whole_sync, symptoms
from .ranking import Candidate, Rule

#: Percentage points a straggler's GPU must idle more than its peers' for the summary to blame its host.
IDLE_GAP_PERCENT = 3.0

STRAGGLER_RANK = CauseSpec(
    "straggler_rank",
    "one rank persistently late at the collective, the others waiting for it",
    RANK,
    (RANK_STRAGGLER.name, SYNC_IMBALANCE.name, THROUGHPUT_COLLAPSE.name, GPU_UNDERUTILIZATION.name),
    "find what slows that rank (its CPU, loader, affinity or links); cordon its node if it persists",
)
LOAD_IMBALANCE = CauseSpec(
    "load_imbalance",
    "ranks wait for each other but no single rank is to blame: the work per rank varies",
    RANK,
    (SYNC_IMBALANCE.name, THROUGHPUT_COLLAPSE.name, GPU_UNDERUTILIZATION.name),
    "give every rank the same work per step: pack or bucket sequences by length, balance experts",
    wait=True,
)

REMEDY_STRAGGLER = (
    "Find what slows rank {rank} on {host}: CPU contention or a noisy neighbour on its cores (top, pidstat, "
    "cgroup CPU limits), the process's CPU/NUMA affinity, its data-loader workers, PCIe/NVLink health "
    "(nvidia-smi topo -m, dmesg for Xid errors). If it persists, cordon the node and restart from the last "
    "checkpoint without it."
)
REMEDY_LOADER = (
    "Rank {rank} on {host} waits for its own data loader: check its loader workers (num_workers, prefetch, "
    "pinned memory, a worker that died or restarts), the CPU cores and NUMA node they run on and what else "
    "competes for them (top, pidstat, cgroup CPU limits), and the storage or shard that rank reads."
)


def straggler(ev: Evidence) -> list[Candidate]:
    """One rank persistently late, the others waiting for it."""
    out = []
    stragglers = ev.active(RANK_STRAGGLER.name)
    whole = explain_whole_sync(stragglers)
    for s in stragglers:
        rank = s.subject.get("rank")
        g = ev.gpu_of(s)
        host = s.subject.get("hostname") or s.evidence.get("hostname") or ev.node.hostname or "its host"
        summary = s.message
        if g is not None:
            utils = ev.util_vs_peers(g)
            if ev.thermally_throttled(g) or ev.power_throttled(g):
                summary += f"; its GPU {g[1]} is throttled"
            elif utils is not None and utils[0] < utils[1] - IDLE_GAP_PERCENT:
                summary += (
                    f"; its GPU {g[1]} is not throttled but idles more than its peers "
                    f"({utils[0]:.0f}% vs {utils[1]:.0f}% busy): the rank's host-side work is slow"
                )
        lateness, own_loader = _made_of(ev.rank_budget(rank))
        remedy = REMEDY_LOADER if own_loader else REMEDY_STRAGGLER
        share = 1.0 if whole else sync_share(s)
        out.append(
            Candidate(
                STRAGGLER_RANK.name,
                base_confidence([s]),
                summary + lateness + ("" if whole else _split_words(share)),
                remedy.format(rank=rank, host=host),
                [s],
                symptoms(ev, SYNC_IMBALANCE.name, THROUGHPUT_COLLAPSE.name, GPU_UNDERUTILIZATION.name),
                dict(s.subject),
                shares={} if whole else {"sync": share},
            )
        )
    return out


_NORMAL = NormalDist()


def sync_share(straggler: Signal) -> float:
    """The fraction of the ranks' wait for slower peers that this straggler explains, beside the others' scatter.

    Each step the ranks wait for the later of the straggler and the last of the others, relative to the median
    rank: the straggler arrives ``slower_than_median`` after it on average and scatters as its peers do
    (``others_scatter``, in proportion to its slower pace); the last of the others arrives
    ``others_last_excess`` after it. Without the straggler the wait would be ``others``: that part is
    ``load_imbalance``'s, and what the later of the two adds beyond it is the straggler's. The expected later of
    two normal arrivals is Clark's (1961): ``others + d·Φ(d/θ) + θ·φ(d/θ)``, ``d = slower − others``. Against
    simulated arrivals it is within 0.05 of the wait that removing the straggler saves.
    """
    evidence = straggler.evidence
    slower = float(evidence.get("slower_than_median", 0.0))
    others = max(0.0, float(evidence.get("others_last_excess", 0.0)))
    theta = (1.0 + slower) * float(evidence.get("others_scatter", 0.0))
    d = slower - others
    added = max(0.0, d) if theta <= 0.0 else d * _NORMAL.cdf(d / theta) + theta * _NORMAL.pdf(d / theta)
    wait = others + added
    return added / wait if wait > 0.0 else 1.0


def _split_words(share: float) -> str:
    return f"; it adds {share:.0%} of the ranks' wait for slower peers, the other ranks' own scatter the rest"


def _made_of(budget: dict[str, float] | None) -> tuple[str, bool]:
    """What a straggler's lateness is made of, from its step budget (its own compute, or its own loader's
    wait), for the summary; and whether it is its loader (a one-rank loader starvation is this rank's)."""
    if budget is None:
        return "", False
    compute, data = budget["compute"], budget["data"]
    own = compute + data
    if own <= 0:
        return "", False
    if data >= compute:
        text = f"its own data loader: {data:.0f} of the {own:.0f} ms a step it adds is waiting for its batches"
        return f"; its lateness is {text}, {compute:.0f} ms its compute", True
    text = f"its own compute: {compute:.0f} of the {own:.0f} ms a step it adds"
    return f"; its lateness is {text}, {data:.0f} ms its data wait", False


REMEDY_IMBALANCE = (
    "Give every rank the same amount of work per step: pack or bucket sequences by length so ranks get "
    "similar token counts, use a token-budget sampler for variable-length data; for MoE models check "
    "expert load balancing (auxiliary loss, capacity factor)."
)


def stragglers_sync_share(stragglers: Sequence[Signal]) -> float:
    """The share of the ranks' wait for slower peers the active stragglers explain (the rest is
    ``load_imbalance``'s): none without one, all when they explain the whole wait, else the latest one's part."""
    if not stragglers:
        return 0.0
    return 1.0 if explain_whole_sync(stragglers) else max(map(sync_share, stragglers))


def stragglers_wait_ms(stragglers: Sequence[Signal]) -> float:
    """How long the other ranks wait for the raised stragglers each step (ms): the latest one's wait, which the
    others' waits for earlier ones are within (0 without one)."""
    return max((float(s.evidence.get("peers_wait_ms") or 0.0) for s in stragglers), default=0.0)


def imbalance(ev: Evidence) -> list[Candidate]:
    """Ranks wait for each other but no single rank is to blame (or the stragglers explain little of it):
    the work per rank varies."""
    sync = ev.job_signal(SYNC_IMBALANCE.name)
    stragglers = ev.active(RANK_STRAGGLER.name)
    if sync is None or explain_whole_sync(stragglers):
        return []
    shares: dict[str, float] = {}
    if stragglers:
        share = 1.0 - stragglers_sync_share(stragglers)
        shares["sync"] = share
        summary = (
            f"{sync.message}; beside the straggler, the other ranks' work also differs step to step "
            f"({share:.0%} of that wait)"
        )
    else:
        summary = f"{sync.message}, yet no rank is consistently the late one: the work per rank differs step to step"
    return [
        Candidate(
            LOAD_IMBALANCE.name,
            base_confidence([sync]),
            summary,
            REMEDY_IMBALANCE,
            [sync],
            symptoms(ev, THROUGHPUT_COLLAPSE.name, GPU_UNDERUTILIZATION.name),
            shares=shares,
        )
    ]


STRAGGLER = Rule(STRAGGLER_RANK, straggler)
IMBALANCE = Rule(LOAD_IMBALANCE, imbalance)
