"""The parts of a rank's entry, which arrive apart and are merged by rank.

A rank's entry has three parts (:data:`~.model.RANK_MEASUREMENTS`, its
heartbeat :data:`~.model.RANK_HEARTBEAT`, its identity :data:`~.model.RANK_IDENTITY`):
the rank gather sends the measurements every few steps, the heartbeat comes
every few seconds, also while the step is blocked. An entry that carries only
some parts keeps the others as they were (:func:`merged_rank`). A report can
hold thousands of ranks, so :func:`carried_parts` answers for a whole report,
a field's column at a time, whether any rank can need a merge at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from operator import attrgetter

from .model import RANK_HEARTBEAT, RANK_IDENTITY, RANK_MEASUREMENTS, RankSample

#: The parts of a rank's entry by name, and their fields.
RANK_PARTS: dict[str, tuple[str, ...]] = {
    "measurements": RANK_MEASUREMENTS,
    "heartbeat": RANK_HEARTBEAT,
    "identity": RANK_IDENTITY,
}


def merged_rank(old: RankSample, new: RankSample) -> RankSample:
    """``new`` with each part it does not carry (measurements, heartbeat, identity) taken from ``old``."""
    kept = {}
    for read, unknown, part in _RANK_PARTS:
        if read(new) == unknown and (known := read(old)) != unknown:
            # only what ``old`` knows: ``new`` holds None there already, so a rank whose entries all carry
            # the same parts (the usual case) is kept as it came, without a copy
            kept.update((name, value) for name, value in zip(part, known, strict=True) if value is not None)
    return replace(new, **kept) if kept else new


#: Per part of a rank's entry: a reader of its fields (one C call for all of them: this runs for every rank of
#: every report), the values of a part not carried, and the field names.
_RANK_PARTS = tuple((attrgetter(*part), (None,) * len(part), part) for part in RANK_PARTS.values())
#: Per part: a reader of each of its fields alone (a column over a report's ranks is one ``map``).
_PART_COLUMNS = {name: tuple(attrgetter(field) for field in part) for name, part in RANK_PARTS.items()}


def carried_parts(ranks: Sequence[RankSample]) -> tuple[frozenset[str], frozenset[str]]:
    """The parts every rank of a report carries, and the parts some rank may carry (names of :data:`RANK_PARTS`).

    Proven a field's column at a time (a few C-level passes, where a loop over 4,096 ranks calling
    :func:`merged_rank` took 8 ms): a part is every rank's when one of its fields is set on every rank, and
    no rank's when each of its fields is unset on every rank. A part shown neither way counts as some rank's
    and not every rank's, so the answer errs only towards merging. :func:`merged_rank` takes nothing for a
    part the new entry carries, nor from an entry that does not carry it.
    """
    every, some = set(), set()
    count = len(ranks)
    for name, columns in _PART_COLUMNS.items():
        for read in columns:
            unset = list(map(read, ranks)).count(None)
            if unset < count:
                some.add(name)
            if not unset:
                every.add(name)
                break
    return frozenset(every), frozenset(some)
