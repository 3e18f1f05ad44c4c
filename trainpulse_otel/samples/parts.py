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

from collections.abc import Sequence
from dataclasses import fields, replace
from itertools import compress, repeat
from operator import attrgetter, is_, ne

from .model import RANK_HEARTBEAT, RANK_IDENTITY, RANK_MEASUREMENTS, RankSample, TrainingSample
from .rules import TRAINING_IDENTITY_FIELDS

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
#: Per part, by name: a reader of its first field, a reader of all its fields and the values of a part not carried.
_CARRIED = tuple(
    (name, attrgetter(part[0]), attrgetter(*part), (None,) * len(part)) for name, part in RANK_PARTS.items()
)


def carried_parts(ranks: Sequence[RankSample]) -> tuple[frozenset[str], frozenset[str]]:
    """The parts every rank of a report carries, and the parts some rank carries (names of :data:`RANK_PARTS`).

    A part is carried when one of its fields is set: a rank whose first field of the part is set carries it,
    any other rank is read whole (each pass over the ranks in C, stopping at the first answer). This answers
    for a whole report instead of :func:`merged_rank` per rank: that takes nothing for a part the new entry
    carries, nor from an entry that does not carry it, so a report needs no merge when every rank carries each
    part that no held entry (nor another entry of the report) carries.
    """
    every = frozenset(
        name
        for name, first, read, unknown in _CARRIED
        if all(read(rank) != unknown for rank in compress(ranks, map(is_, map(first, ranks), repeat(None))))
    )
    some = frozenset(name for name, _, read, unknown in _CARRIED if any(map(ne, map(read, ranks), repeat(unknown))))
    return every, some


#: A report's own fields that say something beyond when and where it was sent.
_REPORT_FIELDS = attrgetter(
    *(f.name for f in fields(TrainingSample) if f.name not in ("timestamp", "hostname", "ranks"))
)


def heartbeats_only(sample: TrainingSample) -> bool:
    """Whether a report carries nothing but rank heartbeats (and the ranks' identities): a rank saying what it
    does now, not a step measured."""
    if not sample.ranks or any(v is not None for v in _REPORT_FIELDS(sample)):
        return False
    return carried_parts(sample.ranks)[1] <= {"heartbeat", "identity"}


#: What describes the job rather than where it is in its run (model, framework, precision, parallel sizes …).
_DESCRIPTION = tuple(sorted(TRAINING_IDENTITY_FIELDS - {"timestamp", "global_step"}))
_READ_DESCRIPTION = attrgetter(*_DESCRIPTION)


def with_job_description(new: TrainingSample, old: TrainingSample | None) -> TrainingSample:
    """``new`` with each descriptive field it leaves out taken from ``old``: a job's description holds until a
    report changes it (a later report without ``model_name`` does not rename the job's series)."""
    if old is None:
        return new
    kept = {
        name: held
        for name, held, given in zip(_DESCRIPTION, _READ_DESCRIPTION(old), _READ_DESCRIPTION(new), strict=True)
        if given is None and held is not None
    }
    return replace(new, **kept) if kept else new
