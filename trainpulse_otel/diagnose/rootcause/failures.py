"""``network_failure`` and ``rank_failure``: the transport between hosts failed, or a rank's process died.

Both are read from the job's own output (:mod:`..detectors.logged`). A dead
rank or a broken link stops the job at its next collective: the others' watchdog
timeouts, the stall and a crash a transport error caused are their consequences,
so these causes list them in ``explains`` and outrank them. A rank aborted
(SIGABRT) while a collective timed out or the transport failed was killed by its
own watchdog (NCCL's async error handling tears the process down): that crash is
a consequence too (:func:`aborted`), not a rank failure.
"""

from __future__ import annotations

from typing import Any

from ..correlate import Evidence
from ..detectors.gpu_faults import GPU_HARDWARE_FAULT
from ..detectors.logged import COLLECTIVE_TIMEOUT, NETWORK_ERROR, OUT_OF_MEMORY, RANK_CRASHED
from ..detectors.stall import TRAINING_STALLED
from ..spec import HARDWARE, RANK, CauseSpec
from ..types import Signal
from .common import SYMPTOMS, base_confidence, of_host_and_rank, symptoms
from .ranking import Candidate, Rule

NETWORK_FAILURE = CauseSpec(
    "network_failure",
    "the collective transport between hosts failed",
    HARDWARE,
    (NETWORK_ERROR.name, COLLECTIVE_TIMEOUT.name, RANK_CRASHED.name, TRAINING_STALLED.name, *SYMPTOMS),
    "check the host's link (ibstat, the switch port, error counters), drain it and restart without it",
)
RANK_FAILURE = CauseSpec(
    "rank_failure",
    "a rank's process died",
    RANK,
    (RANK_CRASHED.name, COLLECTIVE_TIMEOUT.name, NETWORK_ERROR.name, TRAINING_STALLED.name, *SYMPTOMS),
    "read the rank's traceback, fix its cause, and restart from the last checkpoint",
)
REMEDY_NETWORK = (
    "The collective transport on {host} failed ({what}). Check the link: `ibstat` / `ibv_devinfo` for the port "
    "state, the HCA's error counters (`perfquery`, `ethtool -S`), the switch port and cable; NCCL_DEBUG=INFO "
    "NCCL_DEBUG_SUBSYS=NET shows which interface and peer. Drain {host} (scontrol update nodename={host} "
    'state=drain reason="network", or kubectl cordon {host}) and restart the job from its last checkpoint without '
    "it; a link that flaps wants NCCL_IB_TIMEOUT/NCCL_IB_RETRY_CNT raised only once the hardware is known good."
)
REMEDY_RANK = (
    "Rank {rank} on {host} died{why}. Its traceback ({where}) says where: fix that, then restart from the last "
    "checkpoint. torchrun's error file (TORCHELASTIC_ERROR_FILE, --log-dir) keeps every rank's traceback; a "
    "rank killed by a signal (SIGKILL: the OOM killer, `dmesg`; SIGSEGV/SIGABRT: a native crash, rerun with "
    "CUDA_LAUNCH_BLOCKING=1 or under gdb) leaves none."
)


#: How torchrun reports a process the watchdog aborted: killed by SIGABRT (exit code -6; 134 from a shell).
ABORT_SIGNAL, ABORT_EXIT_CODES = "SIGABRT", (-6, 134)
#: What a transport error says when the link itself failed (an InfiniBand or EFA completion with an error status, a
#: port down): a fault of its own, whatever crashed after it.
LINK_OWN = ("completion with error", "IBV_WC_", "NET/IB", "NET/OFI", "Link DOWN", "port error")
#: What a transport error says when its peer went away (a process died, its sockets closed): the words of a
#: consequence of a crash elsewhere, not of a link failing.
PEER_GONE = ("closed by", "reset by peer", "Broken pipe", "remote worker crash", "remote process exited")


def aborted(ev: Evidence) -> list[Signal]:
    """The crashes that are an abort while a collective timed out, the transport failed or a rank ran out of GPU
    memory: the watchdog's teardown (the survivors of a rank's OOM abort when their collectives or loaders give up
    on it), or an exception raised by the collective that failed (``collective`` in its evidence) — a consequence
    of the hang, the broken link or the OOM."""
    if not any(ev.active(name) for name in (COLLECTIVE_TIMEOUT.name, NETWORK_ERROR.name, OUT_OF_MEMORY.name)):
        return []
    return [
        s
        for s in ev.active(RANK_CRASHED.name)
        if s.evidence.get("signal") == ABORT_SIGNAL
        or s.evidence.get("exit_code") in ABORT_EXIT_CODES
        or s.evidence.get("collective")
    ]


def orphaned(ev: Evidence) -> list[Signal]:
    """Transport errors that say their peer went away while a rank elsewhere died of its own error: that death
    closed their connections (gloo: "typically caused by a remote worker crashing"); and those of a process that
    died of its own error first (:func:`_crashed_first`). They are its consequence."""
    dying = [s for s in ev.active(NETWORK_ERROR.name) if _crashed_first(ev, s)]
    gone = [s for s in ev.active(NETWORK_ERROR.name) if _peer_gone(s) and s not in dying]
    if not gone:
        return dying
    own = [s for s in ev.active(RANK_CRASHED.name) if not s.evidence.get("collective") and s not in caused(ev)]
    return [s for s in gone if any(_elsewhere(s, crash) for crash in own)] + dying


def _crashed_first(ev: Evidence, network: Signal) -> bool:
    """Whether the process a transport error is of died of its own error first: a crash of its host and rank (both
    unknown alike) that its log told before it, or that is a CUDA error (the GPU's fault) beside a transport error
    that is no link's own (a socket closing, NCCL's proxy giving up: :data:`LINK_OWN` says which are) — the
    transport then failed because the process was dying, not the other way round."""
    host, rank = network.subject.get("hostname"), network.subject.get("rank")
    crashes = [
        c for c in of_host_and_rank(ev.active(RANK_CRASHED.name), host, rank) if not c.evidence.get("collective")
    ]
    link = any(w in f"{network.evidence.get('error', '')} {network.evidence.get('line', '')}" for w in LINK_OWN)
    return any(told_before(c, network) or (c.evidence.get("cuda_error") and not link) for c in crashes)


def _peer_gone(s: Signal) -> bool:
    words = f"{s.evidence.get('error', '')} {s.evidence.get('line', '')}"
    return any(w in words for w in PEER_GONE)


def _elsewhere(s: Signal, crash: Signal) -> bool:
    """Whether a signal is of another process than a crash: another rank, or another host. A crash the launcher
    told by its local rank only (torchrun's agent line) is compared by that: on one node, the same numbers. A
    crash that names no rank (Ray's dead actor), and no host or the signal's own (a node runs many processes), is
    elsewhere when it was told first: the peer its death took."""
    rank, host = s.subject.get("rank"), s.subject.get("hostname")
    other, other_host = crash.subject.get("rank", crash.evidence.get("local_rank")), crash.subject.get("hostname")
    if other is None and other_host in (None, host):
        return told_before(crash, s)
    return (rank is not None and other is not None and rank != other) or (
        host is not None and other_host is not None and host != other_host
    )


def caused(ev: Evidence) -> list[Signal]:
    """The crashes another failure the job logged explains: :func:`aborted`, a rank's crash beside its own
    out-of-memory or transport error line (those causes name the crash as their consequence; not a crash that came
    first, :func:`_crashed_first`), every crash on
    a host whose GPU is failing (:func:`crashed_by_gpu`), and a worker's exit the lines show no cause of beside an
    out-of-memory (:func:`_exited_unseen`)."""
    out = aborted(ev)
    transport = [n for n in ev.active(NETWORK_ERROR.name) if not _crashed_first(ev, n)]
    for failure in ev.active(OUT_OF_MEMORY.name) + transport:
        host, rank = failure.subject.get("hostname"), failure.subject.get("rank")
        out += [c for c in of_host_and_rank(ev.active(RANK_CRASHED.name), host, rank) if c not in out]
    out += [c for c in crashed_by_gpu(ev) if c not in out]
    crashes = ev.active(RANK_CRASHED.name)
    if any(not _torn_down(c) for c in crashes):  # the launcher's SIGTERM to the survivors of another's death
        out += [c for c in crashes if _torn_down(c) and c not in out]
    failed = any(ev.active(name) for name in (COLLECTIVE_TIMEOUT.name, NETWORK_ERROR.name, OUT_OF_MEMORY.name))
    if failed or _told_stall(ev):  # a traceback the log ends within, its exception unseen: the failure's, the ^C's
        out += [c for c in ev.active(RANK_CRASHED.name) if c.evidence.get("cut") and c not in out]
    out += [c for c in killed_after_timeout(ev) if c not in out]
    out += [c for c in raised_by_own_timeout(ev) if c not in out]
    if ev.active(OUT_OF_MEMORY.name):  # a worker that exited on an exception the log does not show, beside an OOM
        out += [c for c in crashes if _exited_unseen(c) and c not in out]
    return out


def _told_stall(ev: Evidence) -> bool:
    """Whether the job's own lines showed a stall (stamps or a bar's clock: time passing with no step)."""
    stalled = ev.job_signal(TRAINING_STALLED.name)
    return stalled is not None and stalled.evidence.get("inferred_from") == "log_stamps"


def _exited_unseen(crash: Signal) -> bool:
    """A death only the launcher tells, by an exit code of the process's own (a Python exception's ``1``; no signal,
    no exception in the lines): torchrun's agent line for a rank whose table entry the log does not hold."""
    code = crash.evidence.get("exit_code")
    return (
        isinstance(code, int) and code >= 0 and not crash.evidence.get("exception") and not crash.evidence.get("signal")
    )


def raised_by_own_timeout(ev: Evidence) -> list[Signal]:
    """The crashes of a rank told after that same rank's own watchdog timed out: its collective had already
    failed, so what it raised next (the failed collective's error, or whatever the call site made of it) is the
    hang's aftermath. A rank that dies first and leaves the others waiting has no timeout of its own before."""
    timeouts = ev.active(COLLECTIVE_TIMEOUT.name)
    return [
        c
        for c in ev.active(RANK_CRASHED.name)
        if c.subject.get("rank") is not None
        and any(
            c.subject["rank"] in (t.subject.get("ranks") or ()) and _same_host(c, t) and told_before(t, c)
            for t in timeouts
        )
    ]


def _same_host(a: Signal, b: Signal) -> bool:
    """Whether two signals may be of one host: neither names another than the other's (a timeout told for its
    ranks names none)."""
    host, other = a.subject.get("hostname"), b.subject.get("hostname")
    return host is None or other is None or host == other


def killed_after_timeout(ev: Evidence) -> list[Signal]:
    """The deaths only the launcher tells (an exit code, no exception of the rank's own) that it told after a
    collective had timed out: the launcher notices a dead worker within seconds, so a death it reports after a
    watchdog's timeout came after the hang began — the watchdog's teardown or the launcher's, not its cause."""
    timeouts = ev.active(COLLECTIVE_TIMEOUT.name)
    if not timeouts:
        return []
    return [
        c
        for c in ev.active(RANK_CRASHED.name)
        if "exit_code" in c.evidence
        and not c.evidence.get("exception")
        and not any(told_before(c, t) for t in timeouts)
    ]


def told_before(a: Signal, b: Signal) -> bool:
    """Whether ``a`` was told before ``b``: by time, and in one tick by the line of one log that first told it."""
    if a.since != b.since:
        return a.since < b.since
    first_a, first_b = _first_line(a), _first_line(b)
    return first_a is not None and first_b is not None and first_a[0] == first_b[0] and first_a[1] < first_b[1]


def _first_line(s: Signal) -> tuple[str, int] | None:
    """The log and line number (``path:N``, as the logged detectors list them) that first told a signal."""
    lines = s.evidence.get("lines") or ()
    path, _, number = str(lines[0]).rpartition(":") if lines else ("", "", "")
    return (path, int(number)) if path and number.isdigit() else None


def _torn_down(crash: Signal) -> bool:
    """A rank the launcher stopped: killed by SIGTERM (torchrun's agent sends it to the others when one dies), or a
    task srun says it killed (``srun: error: node: task 1: Killed``: ``--kill-on-bad-exit`` ending the step's other
    tasks once one failed)."""
    signal, error = crash.evidence.get("signal"), crash.evidence.get("error")
    return (
        signal == "SIGTERM"
        or crash.evidence.get("exit_code") in (-15, 143)
        or (signal == "SIGKILL" and isinstance(error, str) and error.startswith("srun: task "))
    )


def crashed_by_gpu(ev: Evidence) -> list[Signal]:
    """The crashes on the host of a failing GPU (or where either says no host): a GPU that falls off the bus or
    loses its memory kills the processes on it, whatever they were doing."""
    hosts = {s.subject.get("hostname") for s in ev.active(GPU_HARDWARE_FAULT.name)}
    if not hosts:
        return []
    return [c for c in ev.active(RANK_CRASHED.name) if None in hosts or c.subject.get("hostname") in (*hosts, None)]


def _of_host_or_rank(signals: list[Signal], host: Any, rank: Any) -> list[Signal]:
    return [
        s for s in signals if s.subject.get("hostname") == host or (rank is not None and s.subject.get("rank") == rank)
    ]


def _waiting(ev: Evidence) -> list[Signal]:
    """The signals of the job stopping: the others' watchdog timeouts, and the stall."""
    stalled = ev.job_signal(TRAINING_STALLED.name)
    return ev.active(COLLECTIVE_TIMEOUT.name) + ([stalled] if stalled is not None else [])


def network_failure(ev: Evidence) -> list[Candidate]:
    """One candidate per host (or rank) whose transport failed (not :func:`orphaned`: a crash elsewhere)."""
    out = []
    consequence = orphaned(ev)
    for s in ev.active(NETWORK_ERROR.name):
        if s in consequence:
            continue
        host, rank = s.subject.get("hostname"), s.subject.get("rank")
        named = host or s.evidence.get("host")  # the host its line names (NCCL's prefix), where no node sent it
        crashed = _of_host_or_rank(ev.active(RANK_CRASHED.name), host, rank)
        consequences = crashed + [c for c in aborted(ev) if c not in crashed] + _waiting(ev)
        what = "; ".join(str(v) for v in (s.evidence.get("transport"), s.evidence.get("error")) if v is not None)
        summary = s.message + ("; the job stopped at its next collective" if consequences else "")
        remedy = REMEDY_NETWORK.format(host=named or "the node", what=what or s.evidence.get("line", "see the line"))
        explains = consequences + (symptoms(ev) if consequences else [])
        out.append(
            Candidate(NETWORK_FAILURE.name, base_confidence([s]), summary, remedy, [s], explains, dict(s.subject))
        )
    return out


def rank_failure(ev: Evidence) -> list[Candidate]:
    """One candidate per rank that died of its own accord (not :func:`caused`): the others wait for it at the next
    collective."""
    out = []
    consequence = caused(ev)
    peers = orphaned(ev)
    for s in ev.active(RANK_CRASHED.name):
        if s in consequence:
            continue
        subject = dict(s.subject)
        exception = s.evidence.get("exception")
        if exception:
            subject["exception"] = exception
        lost = [p for p in peers if _elsewhere(p, s)]  # the links its death closed, and the crashes they caused
        consequences = _waiting(ev) + lost + [c for c in consequence if c not in lost]
        why = (
            f" with {exception}"
            if exception
            else (f", exit code {s.evidence['exit_code']}" if "exit_code" in s.evidence else "")
        )
        where = ", ".join(s.evidence.get("lines", ())[:1]) or "its log"
        remedy = REMEDY_RANK.format(
            rank=subject.get("rank", "?"), host=subject.get("hostname", "its host"), why=why, where=where
        )
        summary = s.message + ("; the other ranks wait for it at the next collective" if consequences else "")
        explains = consequences + (symptoms(ev) if consequences else [])
        out.append(Candidate(RANK_FAILURE.name, base_confidence([s]), summary, remedy, [s], explains, subject))
    return out


NETWORK = Rule(NETWORK_FAILURE, network_failure)
RANK_DIED = Rule(RANK_FAILURE, rank_failure)
