"""The ranks' Flight Recorder dumps compared: the first collective not every rank of its group joined.

As PyTorch's ``torchfrtrace`` does: each process group's collectives are aligned across its ranks by their
collective sequence number, from the newest first entry any rank's ring buffer still holds (older ones are
not complete on every rank); the first number that some ranks with a dump have and others lack is where the
job hangs — those that lack it never called it. Its :class:`Mismatch` names the op, the sequence number, the
group, its sizes, the ranks that joined with each one's state (scheduled, started, completed) and the ranks
missing; a rank of the group without a dump is listed apart (it cannot be judged). :func:`events` tells a
mismatch as ``watchdog_timeout`` events, one per waiting rank, so ``collective_timeout`` and ``rank_hang``
name the missing ranks. Pure: dumps in, findings out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from ..samples import WATCHDOG_TIMEOUT, LogEvent
from .flight_recorder import Dump, Entry

#: Ranks listed in an event's details at most (the count is always given), and waiting ranks told as events.
MAX_LISTED = 64


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first collective of a process group that not all its ranks joined."""

    pg_name: str
    pg_desc: str
    seq: int
    op: str
    group: tuple[int, ...]  # the group's global ranks
    joined: tuple[int, ...]
    missing: tuple[int, ...]  # ranks with a dump that never called it
    no_dump: tuple[int, ...]  # ranks of the group without a dump
    states: dict[int, str]  # each joined rank's state of it
    entry: Entry  # the first joined rank's entry (sizes, timeout, call site)

    @property
    def backend(self) -> str | None:
        return self.op.split(":", 1)[0] if ":" in self.op else None

    @property
    def op_name(self) -> str:
        return self.op.split(":", 1)[-1] or "a collective"


def analyse(dumps: Sequence[Dump]) -> list[Mismatch]:
    """Each process group's first collective some of its ranks never joined, the earliest created first."""
    by_rank = {d.rank: d for d in dumps}
    out = []
    for (name, desc), members in _groups(dumps).items():
        found = _first_short(name, desc, members, by_rank)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda m: (m.entry.created_ns or 0, m.pg_name))


def _groups(dumps: Sequence[Dump]) -> dict[tuple[str, str], frozenset[int]]:
    """Every process group the entries name, with its ranks: as ``pg_config`` says, else — for the default
    group, which gloo's dumps leave unnamed — every rank any dump knows, else the ranks with entries in it."""
    seen: dict[tuple[str, str], set[int]] = {}
    for dump in dumps:
        for entry in dump.entries:
            if not entry.p2p and entry.seq is not None:
                seen.setdefault((entry.pg_name, entry.pg_desc), set()).add(dump.rank)
    everyone = {d.rank for d in dumps} | {r for d in dumps for _, ranks in d.groups.values() for r in ranks}
    groups = {}
    for (name, desc), ranks in seen.items():
        config = next((d.groups[name] for d in dumps if name in d.groups), None)
        if config is not None and config[1]:
            groups[(name, desc)] = frozenset(config[1])
        elif desc == "default_pg":
            groups[(name, desc)] = frozenset(everyone)
        else:
            groups[(name, desc)] = frozenset(ranks)
    return groups


def _first_short(name: str, desc: str, members: frozenset[int], by_rank: dict[int, Dump]) -> Mismatch | None:
    dumped = sorted(members & by_rank.keys())
    seqs: dict[int, dict[int, Entry]] = {}
    for rank in dumped:
        ops = seqs[rank] = {}
        for e in by_rank[rank].entries:
            if e.pg_name == name and e.pg_desc == desc and not e.p2p and e.seq is not None:
                ops.setdefault(e.seq, e)  # a coalesced group shares one number: its first op names it
    firsts = [min(ops) for ops in seqs.values() if ops]
    if not firsts:
        return None
    start = max(firsts)  # before this, some ring buffer has already dropped the collective
    for seq in sorted({s for ops in seqs.values() for s in ops if s >= start}):
        joined = [r for r in dumped if seq in seqs[r]]
        if len(joined) < len(dumped):
            entry = seqs[joined[0]][seq]
            return Mismatch(
                name,
                desc,
                seq,
                entry.op,
                tuple(sorted(members)),
                tuple(joined),
                tuple(r for r in dumped if seq not in seqs[r]),
                tuple(sorted(members - by_rank.keys())),
                {r: seqs[r][seq].state for r in joined},
                entry,
            )
    return None


def ranges(ranks: Iterable[int]) -> str:
    """``0-6, 8``: ranks as short runs."""
    out: list[str] = []
    run: list[int] = []
    for rank in sorted(set(ranks)):
        if run and rank == run[-1] + 1:
            run.append(rank)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [rank]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)


def message(m: Mismatch) -> str:
    """One line that says it, as the quoted "line" of its events."""
    group = m.pg_desc or m.pg_name or "?"
    states = sorted(set(m.states.values()))
    text = (
        f"Flight Recorder: {m.op_name} #{m.seq} of process group {group} ({len(m.group)} ranks): "
        f"rank(s) {ranges(m.missing) or '?'} never joined it; rank(s) {ranges(m.joined)} "
        f"{'/'.join(states) or 'wait'} in it"
    )
    if m.entry.call_site:
        text += f", called at {m.entry.call_site}"
    if m.no_dump:
        text += f"; no dump from rank(s) {ranges(m.no_dump)}"
    return text


def details(m: Mismatch) -> dict[str, Any]:
    """What an event keeps of it: flat, JSON-ready."""
    e = m.entry
    out: dict[str, Any] = {"flight_recorder": True, "op": m.op_name, "seq": m.seq, "pg_name": m.pg_name}
    if m.backend:
        out["backend"] = m.backend
    if m.pg_desc:
        out["pg_desc"] = m.pg_desc
    out["group_size"] = len(m.group)
    out["missing_ranks"], out["missing_count"] = list(m.missing[:MAX_LISTED]), len(m.missing)
    out["joined_count"] = len(m.joined)
    for state in sorted(set(m.states.values())):
        out[f"{state or 'unknown'}_ranks"] = [r for r, s in m.states.items() if s == state][:MAX_LISTED]
    if m.no_dump:
        out["no_dump_ranks"], out["no_dump_count"] = list(m.no_dump[:MAX_LISTED]), len(m.no_dump)
    if e.input_sizes:
        out["numel_in"] = sum(prod(s) for s in e.input_sizes)
    if e.output_sizes:
        out["numel_out"] = sum(prod(s) for s in e.output_sizes)
    if e.timeout_ms is not None:
        out["timeout_ms"] = e.timeout_ms
    if e.call_site:
        out["call_site"] = e.call_site
    return out


def events(m: Mismatch, ts: float, sources: dict[int, str] | None = None) -> list[LogEvent]:
    """The mismatch as ``watchdog_timeout`` events at ``ts``: one per waiting rank (at most
    :data:`MAX_LISTED`), each citing its dump file (``sources``: rank → file)."""
    text, info = message(m), details(m)
    sources = sources or {}
    return [
        LogEvent(ts=ts, kind=WATCHDOG_TIMEOUT, message=text, rank=r, source=sources.get(r), details=info)
        for r in m.joined[:MAX_LISTED]
    ]


def when(m: Mismatch) -> float | None:
    """When its watchdog fired, by the dump's clock (the first joined rank's call plus its timeout), in s."""
    if m.entry.created_ns is None:
        return None
    return m.entry.created_ns / 1e9 + (m.entry.timeout_ms or 0) / 1000.0
