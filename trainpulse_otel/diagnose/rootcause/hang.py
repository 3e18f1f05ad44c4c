"""``rank_hang``: one or a few ranks stopped while the others wait for them at a collective.

The cause of a ``training_stalled`` job unless a deeper one explains the stall
(a failing GPU lists ``training_stalled`` in its ``explains`` and ranks above
this). Its subject is what the stall detector found from the heartbeats, the
stacks or the GPUs: the lagging ranks, their GPUs and host, and the phase they
are stuck in. Where their heartbeats sent stacks, the evidence holds the ranks
grouped by stack (``stacks``), and the summary and the remediation start from
the line of the training script where the stuck ranks stand (:mod:`..stacks`);
when nothing singles a rank out, the summary says so, naming the ranks that did
send heartbeats, and the remediation starts with finding it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..correlate import Evidence
from ..detectors.logged import COLLECTIVE_TIMEOUT, RANK_CRASHED
from ..detectors.stall import TRAINING_STALLED
from ..spec import RANK, CauseSpec
from ..stacks import frame_words, frames_in, group_of, script_frame
from ..types import Signal
from .common import base_confidence
from .failures import aborted
from .ranking import Candidate, Rule

RANK_HANG = CauseSpec(
    "rank_hang",
    "one or a few ranks stopped while the others wait for them at a collective",
    RANK,
    (TRAINING_STALLED.name, COLLECTIVE_TIMEOUT.name, RANK_CRASHED.name),
    "find where the stuck rank is (py-spy dump), dump the collectives (NCCL flight recorder), restart without it",
)

FLIGHT_RECORDER = (
    "For the collective itself, enable PyTorch's NCCL flight recorder before (re)starting: "
    "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/fr/rank_ (TORCH_FR_BUFFER_SIZE and TORCH_FR_DUMP_TEMP_FILE on newer "
    "PyTorch); each rank dumps its ring buffer when the watchdog times out, and `torchfrtrace /shared/fr -p rank_` "
    "names the ranks missing from the collective."
)
FROM_DUMPS = (
    "The Flight Recorder dumps named the ranks; `torchfrtrace DIR -p PREFIX -j` prints every rank's entries, and "
    "each entry's stack shows where the waiting ranks called the collective."
)
RESTART = (
    "Then restart from the last checkpoint; if the rank's GPU is at fault (Xid errors in dmesg, ECC errors, "
    "nvidia-smi -q showing it degraded), drain that node first (scontrol update nodename={host} state=drain "
    'reason="rank hang", or kubectl cordon {host}) so the job does not land on it again.'
)


def rank_hang(ev: Evidence) -> list[Candidate]:
    """The job stalled: the ranks that lag, or an honest "unknown"; or, seen only in the job's output, a
    collective's watchdog timed out waiting for them."""
    stalled = ev.job_signal(TRAINING_STALLED.name)
    timeouts = ev.active(COLLECTIVE_TIMEOUT.name)
    if stalled is None:
        return [_from_timeout(ev, s) for s in timeouts]
    if timeouts:
        timeouts = timeouts + aborted(ev)  # the watchdog's teardown of the ranks that waited
    lagging: Sequence[Mapping[str, Any]] = stalled.evidence.get("lagging") or ()
    host = _host(lagging) or ev.node.hostname
    groups: Sequence[Mapping[str, Any]] = stalled.evidence.get("stacks") or ()
    where = _stuck_at(groups, lagging)
    return [
        Candidate(
            RANK_HANG.name,
            base_confidence([stalled]),
            _summary(stalled.message, lagging, stalled.evidence, where),
            _remediation(lagging, host, where),
            [stalled],
            timeouts,
            subject=_subject(lagging, host),
            evidence={"stacks": list(groups)} if groups else {},
        )
    ]


def _stuck_at(groups: Sequence[Mapping[str, Any]], lagging: Sequence[Mapping[str, Any]]) -> str | None:
    """``file:line in function`` of the training script where the first stuck rank with a stack stands."""
    for entry in lagging:
        group = group_of(groups, entry["rank"]) if "rank" in entry else None
        frame = script_frame(frames_in(group)) if group is not None else None
        if frame is not None:
            return frame_words(frame)
    return None


def _from_timeout(ev: Evidence, timeout: Signal) -> Candidate:
    """A watchdog timeout without a stall seen: the ranks behind (or that never reported) are the stuck ones."""
    evidence = timeout.evidence
    stuck = evidence.get("behind_ranks") or evidence.get("missing_ranks") or []
    lagging = [{"rank": r} for r in stuck]
    host = ev.node.hostname
    if stuck:
        how = "their watchdogs never fired"
        if evidence.get("behind_ranks"):
            how = "their sequence numbers lag the others'"
        elif evidence.get("flight_recorder"):
            how = "the Flight Recorder dumps show they never called the collective the others wait in"
        summary = f"{timeout.message}. Rank(s) {', '.join(map(str, stuck))} are the stuck ones: {how}"
    else:
        summary = (
            f"{timeout.message}. The stuck rank is unknown: no reporting rank is behind the others, and which of "
            "the job's ranks never reported is not known (send rank heartbeats, or read every rank's log)"
        )
    remediation = _remediation(lagging, host)
    if evidence.get("flight_recorder"):  # it is on already: say what else the dumps hold
        remediation = remediation.replace(FLIGHT_RECORDER, FROM_DUMPS)
    return Candidate(
        RANK_HANG.name,
        base_confidence([timeout]),
        summary,
        remediation,
        [timeout],
        aborted(ev),  # the watchdog's teardown of the ranks that waited
        subject=_subject(lagging, None),
    )


def _subject(lagging: Sequence[Mapping[str, Any]], host: str | None) -> dict[str, Any]:
    if not lagging:
        return {}
    if len(lagging) == 1:
        one = lagging[0]
        keys = ("rank", "gpu_index", "hostname", "phase")
        subject = {k: one[k] for k in keys if one.get(k) is not None}
        if "hostname" not in subject and host:
            subject["hostname"] = host
        return subject
    subject: dict[str, Any] = {}
    for key, plural in (("rank", "ranks"), ("gpu_index", "gpu_indices"), ("hostname", "hostname")):
        values = sorted({e[key] for e in lagging if e.get(key) is not None})
        if values:
            subject[plural] = values
    phases = sorted({e["phase"] for e in lagging if e.get("phase")})
    if phases:
        subject["phase"] = phases[0] if len(phases) == 1 else phases
    if "hostname" not in subject and host:
        subject["hostname"] = [host]
    return subject


def _summary(message: str, lagging: Sequence[Mapping[str, Any]], evidence: Mapping[str, Any], where: str | None) -> str:
    if not lagging:
        return f"{message}. The stuck rank is unknown: {_why_unknown(evidence)}"
    one = len(lagging) == 1
    found_by = evidence.get("inferred_from")
    if found_by == "heartbeats":
        how = "its heartbeat" if one else "their heartbeats"
    elif found_by == "stacks":
        how = "its stack, unlike the others'" if one else "their stacks, unlike the others'"
    else:
        how = "its GPU idling" if one else "their GPUs idling"
        how += " while the peers' GPUs spin in the collective"
    summary = f"{message}. The others wait for {'it' if one else 'them'} at the collective; found by {how}"
    if where is not None:
        summary += f". Rank {lagging[0]['rank']} stands at {where} (its stack)"
    return summary


def _why_unknown(evidence: Mapping[str, Any]) -> str:
    """What was seen, honestly: which ranks sent heartbeats (never "none" when some came)."""
    count = evidence.get("heartbeat_ranks") or 0
    if not count:
        return (
            "no rank heartbeats came, and the GPUs do not single one out (send heartbeats with TrainingMonitor, "
            "or look at every rank's stack)"
        )
    ids = evidence.get("heartbeat_rank_ids") or []
    named = ", ".join(map(str, ids)) + (f" and {count - len(ids)} more" if count > len(ids) else "")
    waiting = evidence.get("waiting_phase")
    state = f"every one waits in {waiting}" if waiting else "none stands apart in step, phase or stack"
    return (
        f"{count} rank(s) sent heartbeats ({named}) and {state}; a rank that sent none may be the stuck one "
        "(give every rank a TrainingMonitor; with DDP pass model= so its all-reduce is marked)"
    )


def _remediation(lagging: Sequence[Mapping[str, Any]], host: str | None, stuck_at: str | None = None) -> str:
    where = host or "<host>"
    if lagging and stuck_at is not None:
        one = lagging[0]
        rank, pid = one.get("rank", "<rank>"), one.get("pid")
        target = f"py-spy dump --native --pid {pid}" if pid is not None else "py-spy dump --native"
        first = (
            f"Start at {stuck_at}: rank {rank} stands there while the others wait at the collective — what it "
            "waits on (a data-loader worker, a filesystem call, a lock, a sleep, a branch only some ranks take) "
            f"is the hang. For the native frames under that line, `{target}` on {one.get('hostname') or where}."
        )
    elif lagging:
        one = lagging[0]
        rank = one.get("rank", "<rank>")
        pid = one.get("pid")
        target = f"py-spy dump --pid {pid}" if pid is not None else f"py-spy dump --pid <pid of rank {rank}>"
        first = (
            f"See where rank {rank} is stuck: on {one.get('hostname') or where} run `{target}` (add --native for "
            "C++/CUDA frames); a data-loader worker, a filesystem call or a lock shows in its stack."
        )
    else:
        first = (
            "Find the stuck rank: run `py-spy dump --pid <pid>` on every rank's process (the one not inside the "
            "collective is the culprit), e.g. `pgrep -f train.py | xargs -n1 py-spy dump --pid`."
        )
    return f"{first} {FLIGHT_RECORDER} {RESTART.format(host=where)}"


def _host(lagging: Sequence[Mapping[str, Any]]) -> str | None:
    return next((e["hostname"] for e in lagging if e.get("hostname")), None)


HANG = Rule(RANK_HANG, rank_hang)
