"""The parts of a rank's entry, which arrive apart and are merged by rank.

A rank's entry has three parts (:data:`~.model.RANK_MEASUREMENTS`, its
heartbeat :data:`~.model.RANK_HEARTBEAT`, its identity :data:`~.model.RANK_IDENTITY`):
the rank gather sends the measurements every few steps, the heartbeat comes
every few seconds, also while the step is blocked. An entry that carries only
some parts keeps the others as they were (:func:`merged_rank`). A report can
hold thousands of ranks, so :func:`carried_parts` answers for a whole report
which parts every rank carries and which some rank does: whether any rank can
need a merge at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from operator import attrgetter

from .builder import compiled
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


def _compile_carried() -> Callable[[RankSample], int]:
    """Which parts one rank entry carries, as bits (bit ``i``: the ``i``-th of :data:`RANK_PARTS`), compiled
    into straight-line code: a part is carried when one of its fields is set, so each part reads its fields
    only up to the first one set. Field names come from the dataclass's fields (identifiers, checked)."""
    lines = ["def carried(rank):", "    bits = 0"]
    for bit, part in enumerate(RANK_PARTS.values()):
        if not all(name.isidentifier() for name in part):
            raise ValueError(f"{part}: not field names")
        lines += [
            "    if " + " or ".join(f"rank.{name} is not None" for name in part) + ":",
            f"        bits |= {1 << bit}",
        ]
    lines.append("    return bits")
    return compiled("carried", lines)


_CARRIED = _compile_carried()
_NAMES = tuple(RANK_PARTS)


def carried_parts(ranks: Sequence[RankSample]) -> tuple[frozenset[str], frozenset[str]]:
    """The parts every rank of a report carries, and the parts some rank carries (names of :data:`RANK_PARTS`).

    One compiled check per rank and a set of the few combinations (a loop over 4,096 ranks calling
    :func:`merged_rank` took 8 ms): :func:`merged_rank` takes nothing for a part the new entry carries, nor
    from an entry that does not carry it, so a report needs no merge when every rank carries each part that
    no held entry (nor another entry of the report) carries.
    """
    combinations = set(map(_CARRIED, ranks))
    every, some = (1 << len(_NAMES)) - 1, 0
    for bits in combinations:
        every &= bits
        some |= bits
    return _named(every), _named(some)


def _named(bits: int) -> frozenset[str]:
    return frozenset(name for i, name in enumerate(_NAMES) if bits >> i & 1)
