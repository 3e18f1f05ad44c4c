"""XID totals from XID events: a GPU sample carries the codes the driver reported since that GPU's previous
sample; a frame (and Prometheus) carries one running total per GPU and code, so a GPU that fell off the bus
keeps its count. This daemon's collectors and a job trace's other nodes are counted the same way."""

from __future__ import annotations

from collections.abc import Iterable

from ..samples import GpuSample, XidCount

#: Times each (GPU index, XID code) was seen.
XidTotals = dict[tuple[int, int], int]


def count_xid_events(totals: XidTotals, gpus: Iterable[GpuSample]) -> bool:
    """Add every XID code the samples carry to ``totals``; True when there was one."""
    new = [(g.index, code) for g in gpus if g.xid_errors for code in g.xid_errors]
    for key in new:
        totals[key] = totals.get(key, 0) + 1
    return bool(new)


def xid_counts(totals: XidTotals, node: str | None = None) -> tuple[XidCount, ...]:
    """The totals as the frame's sorted XID counts (of ``node``; None: this daemon's own)."""
    return tuple(XidCount(gpu, xid, n, node) for (gpu, xid), n in sorted(totals.items()))
