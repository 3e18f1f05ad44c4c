"""Plain evidence of a hang in the ranks' heartbeats and stacks: what lets ``training_stalled`` use its faster
threshold. Pure: ranks and stacks in, a yes or no out."""

from __future__ import annotations

from ...samples import CHECKPOINT_PHASES, COLLECTIVE_PHASES, RankSample, RankStack
from ..stacks import odd_ranks, stack_groups

#: A rank in one of these phases is not stuck, however long its peers wait for it: its own evaluation,
#: a save, a closed monitor. The faster threshold never applies while one is.
NOT_STUCK_PHASES = frozenset(("eval", "idle")) | CHECKPOINT_PHASES


def peers_wait_plainly(since: float, ranks: tuple[RankSample, ...], max_elsewhere_share: float) -> bool:
    """Whether the heartbeats plainly show a hang since ``since``: every heartbeating rank has stayed in its
    phase since then; a majority wait in a collective at the furthest step; the rest — at least one, at most
    ``max_elsewhere_share`` of them (one always may be) — are stuck elsewhere or behind, none in a phase of
    :data:`NOT_STUCK_PHASES`. A rank whose phase moved since, or that does not say since when, is no plain
    evidence (a merely slow rank changes phase with every step it completes)."""
    beating = [r for r in ranks if r.phase is not None]
    steps = [r.global_step for r in beating if r.global_step is not None]
    top = max(steps) if steps else None
    waiting = 0
    for r in beating:
        if r.phase_since is None or not r.phase_since <= since or r.phase in NOT_STUCK_PHASES:
            return False
        behind = top is not None and r.global_step is not None and r.global_step < top
        if r.phase in COLLECTIVE_PHASES and not behind:
            waiting += 1
    elsewhere = len(beating) - waiting
    return 1 <= elsewhere <= max(1.0, max_elsewhere_share * len(beating)) and 2 * waiting > len(beating)


def one_odd_stack(
    since: float, ranks: tuple[RankSample, ...], stacks: tuple[RankStack, ...], max_elsewhere_share: float
) -> bool:
    """Whether the stacks plainly show a hang since ``since`` where the phases cannot: every heartbeating rank at
    one step, in one phase (none of :data:`NOT_STUCK_PHASES`) since then, each with its stack; all but one or a
    few (at most ``max_elsewhere_share``) standing at the very same frames — waiting alike — and those few
    elsewhere."""
    beating = [r for r in ranks if r.phase is not None]
    if len(beating) < 2 or len({(r.global_step, r.phase) for r in beating}) != 1:
        return False
    if any(r.phase in NOT_STUCK_PHASES or r.phase_since is None or r.phase_since > since for r in beating):
        return False
    groups = stack_groups(beating, stacks)
    if sum(len(g["ranks"]) for g in groups) != len(beating):
        return False  # a rank without a current stack: nothing plain about it
    odd = odd_ranks(groups)
    return 1 <= len(odd) <= max(1.0, max_elsewhere_share * len(beating))
