"""Failures the job's own output tells: a collective timed out, the transport failed, memory ran out, a rank died.

Each detector reads the tick's failure events of its kind (:mod:`trainpulse_otel.samples.events`: what a log
line said) and raises its signal, critical, on the first one: a logged failure is a fact, not a trend. An
episode holds while its lines are recent (``hold_s``) and ends when training moves past the step it happened
at (a restarted job). Evidence quotes the first line and says where every line was written (file and line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...samples import CUDA_OOM, PROCESS_FAILED, TRANSPORT_ERROR, WATCHDOG_TIMEOUT, LogEvent
from ..spec import RANKS, SignalSpec
from ..thresholds import CONVENTION, SECONDS, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, Finding, Policy
from .base import BaseDetector

#: A logged failure is raised on its first observation and clears soon after its episode ends.
LOGGED = Policy(raise_evidence=1.0, min_observations=1, clear_after_s=5.0)
COLLECTIVE_TIMEOUT = SignalSpec(
    "collective_timeout",
    "a collective did not finish within its watchdog's timeout (NCCL or gloo)",
    RANKS,
    0.24,
    "stall",
    policy=LOGGED,
)
NETWORK_ERROR = SignalSpec(
    "network_error",
    "the collective transport failed (an InfiniBand or socket error)",
    RANKS,
    0.24,
    "stall",
    policy=LOGGED,
)
OUT_OF_MEMORY = SignalSpec(
    "out_of_memory", "an allocation failed: CUDA out of memory", RANKS, 0.24, "stall", policy=LOGGED
)
RANK_CRASHED = SignalSpec("rank_crashed", "a rank's process exited with an error", RANKS, 0.24, "stall", policy=LOGGED)
#: Every logged failure scores this: critical, held while its episode lasts.
FAILURE_SCORE = 3.0
#: Lines listed in the evidence at most (the count is always given).
MAX_LISTED = 16
HOLD = Knob(
    "hold_s",
    600.0,
    SECONDS,
    CONVENTION,
    "a logged failure keeps its signal up this long after its last line, unless training moves past it: a "
    "crashed or hung job says nothing more, and someone (or an action) must see it",
    1,
)


@dataclass
class Episode:
    """One subject's failure lines since its first, and the step training was at then."""

    first: LogEvent
    step: int | None
    events: list[LogEvent] = field(default_factory=list)
    #: Its subject as first reported (kept, so lines that come later do not make it another signal).
    subject: dict[str, Any] | None = None

    @property
    def last_ts(self) -> float:
        return self.events[-1].ts


class LoggedFailure(BaseDetector):
    """Episodes of one event kind, by subject; subclasses say the subject and the words."""

    kind: ClassVar[str] = ""
    knobs = (HOLD,)

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self.hold_s = self.thresholds.hold_s
        self.signal = self.signals[0].name
        self._episodes: dict[tuple, Episode] = {}
        self._step: int | None = None

    def update(self, tick: Tick) -> list[Finding] | None:
        for event in tick.events:
            if event.kind == self.kind:
                key = self.key(event)
                episode = self._episodes.get(key)
                if episode is None:
                    episode = self._episodes[key] = Episode(event, self._step)
                elif "exception" in event.details and "exception" not in episode.first.details:
                    episode.first = event  # the line that says why (a traceback's exception) over a bare exit code
                episode.events.append(event)
        if self._episodes:
            self._forget(tick)
        report = tick.report
        if report is not None and report.global_step is not None:
            self._step = report.global_step
        # judged every tick: no episode is "all fine", so an ended episode's signal clears
        return [self.finding(key, episode, tick) for key, episode in self._episodes.items()]

    def _forget(self, tick: Tick) -> None:
        """End the episodes whose lines are old, or past which training has moved."""
        report = tick.report
        step = report.global_step if report is not None else None
        for key, episode in list(self._episodes.items()):
            resumed = step is not None and episode.step is not None and step > episode.step
            if (resumed and (report.timestamp or tick.ts) > episode.last_ts) or tick.ts - episode.last_ts > self.hold_s:  # type: ignore[union-attr]
                del self._episodes[key]

    def key(self, event: LogEvent) -> tuple:
        """What one episode is of (a rank, a host)."""
        return (event.hostname, event.rank)

    def subject(self, episode: Episode) -> dict[str, Any]:
        first = episode.first
        subject: dict[str, Any] = {}
        if first.rank is not None:
            subject["rank"] = first.rank
        if first.gpu_index is not None:
            subject["gpu_index"] = first.gpu_index
        if first.hostname is not None:
            subject["hostname"] = first.hostname
        return subject

    def words(self, episode: Episode) -> str:
        raise NotImplementedError

    def details(self, episode: Episode, tick: Tick | None = None) -> dict[str, Any]:
        """What the evidence says beyond the lines (the first line's details by default)."""
        return dict(episode.first.details)

    def finding(self, key: tuple, episode: Episode, tick: Tick) -> Finding:
        lines = [e.where() for e in episode.events if e.where()]
        evidence: dict[str, Any] = {
            **self.details(episode, tick),
            "line": episode.first.message,
            "lines": lines[:MAX_LISTED],
            "count": len(episode.events),
            "since": episode.first.ts,
        }
        if episode.subject is None:
            episode.subject = self.subject(episode)
        return Finding(self.signal, FAILURE_SCORE, CRITICAL, self.words(episode), episode.subject, evidence)


def _watchdog_rank(event: LogEvent) -> int | None:
    """The rank a watchdog line is of: its ``[rankN]:`` prefix or file, else the watchdog's own ``[Rank N]``
    (its rank in the process group: the global rank in the default group, where unprefixed logs of old
    PyTorch wrote it)."""
    if event.rank is not None:
        return event.rank
    pg_rank = event.details.get("pg_rank")
    return pg_rank if isinstance(pg_rank, int) else None


def _who(episode: Episode) -> str:
    first = episode.first
    rank = f"rank {first.rank}" if first.rank is not None else "a rank"
    host = first.hostname or first.details.get("host")  # the node that sent it, else the host its line names
    return rank + (f" on {host}" if host else "")


class CollectiveTimeout(LoggedFailure):
    """``collective_timeout``: a watchdog's timeout, one episode for the job (every rank's lines together).

    Subject: the ranks that first reported it; evidence: every rank whose watchdog fired (`ranks`), the op, its
    sequence number, the timeout and how long it ran,
    and — where several ranks' lines disagree on the sequence number — the ranks behind (the lowest number: they
    never reached the collective the others wait in), and the ranks missing: those a Flight Recorder event names,
    else the job's ranks that reported nothing.
    """

    name = "collective_timeout"
    signals = (COLLECTIVE_TIMEOUT,)
    kind = WATCHDOG_TIMEOUT

    def key(self, event: LogEvent) -> tuple:
        return ()

    def subject(self, episode: Episode) -> dict[str, Any]:
        ranks = tuple(sorted({r for r in map(_watchdog_rank, episode.events) if r is not None}))
        return {"ranks": ranks} if ranks else {}

    def details(self, episode: Episode, tick: Tick | None = None) -> dict[str, Any]:
        details = dict(episode.first.details)
        seqs = {
            rank: e.details["seq"]
            for e in episode.events
            if (rank := _watchdog_rank(e)) is not None and "seq" in e.details and not e.details.get("flight_recorder")
        }
        dumps = next((e.details for e in episode.events if e.details.get("flight_recorder")), {})
        for key in ("flight_recorder", "missing_ranks", "missing_count", "call_site"):
            if key in dumps:  # the dumps name the ranks missing, whichever line came first
                details.setdefault(key, dumps[key])
        named = next((e.details["missing_ranks"] for e in episode.events if e.details.get("missing_ranks")), None)
        if named is not None:  # a watchdog that names them (Horovod's stall inspector)
            details.setdefault("missing_ranks", named)
        if len(set(seqs.values())) > 1:
            lowest = min(seqs.values())
            details["behind_ranks"] = sorted(r for r, s in seqs.items() if s == lowest)
            details["seq_by_rank"] = {str(r): s for r, s in sorted(seqs.items())}
        desync = sorted({r for e in episode.events if e.details.get("desync") for r in e.details["behind_ranks"]})
        if desync:  # PyTorch's desync report names them
            details["behind_ranks"] = desync
        training = tick.training if tick is not None else None
        known = {r.rank for r in training.ranks} if training is not None else set()
        reported = set(seqs) | {r for r in map(_watchdog_rank, episode.events) if r is not None}
        if reported:  # every rank whose watchdog fired so far (the subject stays the first tick's)
            details["ranks"] = sorted(reported)[:MAX_LISTED]
        if "missing_ranks" not in details and reported and known > reported:  # watchdogs that said nothing
            missing = sorted(known - reported)
            details["missing_ranks"], details["missing_count"] = missing[:MAX_LISTED], len(missing)
        return details

    def words(self, episode: Episode) -> str:
        d = self.details(episode)
        ranks = self.subject(episode).get("ranks", [])
        op = f"{d.get('op', 'a collective')}" + (f" #{d['seq']}" if "seq" in d else "")
        ran = f" after {d['ran_ms'] / 1000:.0f} s" if isinstance(d.get("ran_ms"), (int, float)) else ""
        who = f"rank(s) {', '.join(map(str, ranks))}" if ranks else "a rank"
        text = f"{op} timed out{ran}: its watchdog fired on {who}"
        if d.get("behind_ranks"):
            text += f"; rank(s) {', '.join(map(str, d['behind_ranks']))} behind at an earlier collective"
        elif d.get("flight_recorder") and d.get("missing_ranks"):  # the dumps say who never called it
            text += f"; rank(s) {', '.join(map(str, d['missing_ranks']))} never joined it (Flight Recorder)"
        return text


class NetworkError(LoggedFailure):
    """``network_error``: the collective transport failed, by host and rank; evidence: the transport, its
    error codes and the peer (``peer_ranks``: every peer rank the lines name)."""

    name = "network_error"
    signals = (NETWORK_ERROR,)
    kind = TRANSPORT_ERROR

    def details(self, episode: Episode, tick: Tick | None = None) -> dict[str, Any]:
        details = dict(episode.first.details)
        peers = sorted({e.details["peer_rank"] for e in episode.events if isinstance(e.details.get("peer_rank"), int)})
        if peers:
            details["peer_ranks"] = peers[:MAX_LISTED]
        return details

    def words(self, episode: Episode) -> str:
        d = episode.first.details
        transport = d.get("transport", "the transport")
        error = f" (error {d['error']})" if "error" in d else ""
        return f"{transport} failed on {_who(episode)}{error}: {len(episode.events)} error line(s)"


class OutOfMemory(LoggedFailure):
    """``out_of_memory``: CUDA out of memory, by rank and GPU; evidence: the sizes the message gives."""

    name = "out_of_memory"
    signals = (OUT_OF_MEMORY,)
    kind = CUDA_OOM

    def key(self, event: LogEvent) -> tuple:
        return (event.hostname, event.rank, event.gpu_index)

    def words(self, episode: Episode) -> str:
        d, first = episode.first.details, episode.first
        gpu = f" (GPU {first.gpu_index})" if first.gpu_index is not None else ""
        asked = f" of {d['requested_bytes'] / 2**30:.2f} GiB" if isinstance(d.get("requested_bytes"), int) else ""
        return f"CUDA ran out of memory on {_who(episode)}{gpu}: an allocation{asked} failed"


class RankCrashed(LoggedFailure):
    """``rank_crashed``: a rank's process exited with an error; evidence: the exception or exit code."""

    name = "rank_crashed"
    signals = (RANK_CRASHED,)
    kind = PROCESS_FAILED

    def details(self, episode: Episode, tick: Tick | None = None) -> dict[str, Any]:
        """The episode's lines together, the first's words first: a traceback cut short says why, the agent's
        ``failed (exitcode: -11) local_rank: 1`` which rank and how it died."""
        merged: dict[str, Any] = {}
        for event in reversed(episode.events):
            merged.update(event.details)
        return {**merged, **episode.first.details}

    def words(self, episode: Episode) -> str:
        d = episode.first.details
        if d.get("exception"):
            why = f"{d['exception']}: {d.get('error', '')}".rstrip(": ")
        elif d.get("exit_code") is not None:
            why = f"exit code {d['exit_code']}" + (f" ({d['signal']})" if d.get("signal") else "")
        else:
            why = "an error"
        return f"{_who(episode)} crashed: {why}"
