"""What the built-in rules share: the strength of evidence, the job-wide symptoms, a straggler's share.

Until the job has measurably lost time, a candidate ranks by the strength of
its evidence (:func:`base_confidence`, the levels below); afterwards by the
share of lost time it explains (:mod:`.ranking`). :func:`symptoms` gives the
job-wide consequences a deeper cause may account for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..correlate import Evidence
from ..detectors.comms import SYNC_IMBALANCE
from ..detectors.llm import LOW_MFU
from ..detectors.ranks import RANK_STRAGGLER
from ..detectors.throughput import GPU_UNDERUTILIZATION, THROUGHPUT_COLLAPSE
from ..types import CRITICAL, Signal

#: How strongly evidence speaks before any time is lost, weakest first: a symptom nothing else explains; one
#: warning; a warning a second look agrees with (a GPU hot *and* above its peers); a likely mechanism; a
#: critical signal or a confirming cross-layer check; a strong one; the signal and the check behind it agreeing.
SYMPTOM_ONLY = 0.45
WARNED = 0.6
CORROBORATED = 0.65
LIKELY = 0.7
CRITICAL_EVIDENCE = 0.75
STRONG = 0.8
CONFIRMED = 0.85
#: The job-wide symptoms a deeper cause may account for, in the order a cause lists them.
SYMPTOMS = (THROUGHPUT_COLLAPSE.name, GPU_UNDERUTILIZATION.name, LOW_MFU.name, SYNC_IMBALANCE.name)
#: How widely the other ranks scatter (a relative sigma of their lateness) for the work per rank to vary on
#: its own: across 8 ranks the last one then arrives ~14 % of a step after the median, which alone is
#: ``sync_imbalance``'s 10 % warning.
IMBALANCE_SCATTER = 0.10


def base_confidence(signals: Iterable[Signal], warning: float = WARNED, critical: float = CRITICAL_EVIDENCE) -> float:
    """``critical`` when any of ``signals`` is critical, else ``warning``."""
    return critical if any(s.severity == CRITICAL for s in signals) else warning


def explain_whole_sync(stragglers: Sequence[Signal]) -> bool:
    """Whether these stragglers are all of the ranks' wait for slower peers.

    A straggler among ranks that otherwise agree tightly is the whole wait. When the other ranks also
    scatter widely step to step (``rank_straggler``'s ``others_scatter``), the work per rank varies too:
    fixing the straggler leaves part of the wait (:func:`.ranks.sync_share`), so both causes are there.
    """
    return bool(stragglers) and all(s.evidence.get("others_scatter", 0.0) < IMBALANCE_SCATTER for s in stragglers)


def symptoms(ev: Evidence, *names: str) -> list[Signal]:
    """The active job-wide symptom signals among ``names`` (all SYMPTOMS by default).

    ``sync_imbalance`` is left out while stragglers stand among ranks that also scatter (not
    :func:`explain_whole_sync`): that wait is then the stragglers' part and ``load_imbalance``'s, so no cause
    explains it whole; a cause explains the part the stragglers it explains add (their ``shares``)."""
    stragglers = ev.active(RANK_STRAGGLER.name)
    split = bool(stragglers) and not explain_whole_sync(stragglers)
    wanted = [n for n in names or SYMPTOMS if not (split and n == SYNC_IMBALANCE.name)]
    return [s for s in map(ev.job_signal, wanted) if s is not None]


def pct(x: float | None) -> str:
    """``0.234`` → ``"23%"``; None → ``"?"``."""
    return "?" if x is None else f"{100 * x:.0f}%"


def of_host_and_rank(signals: list[Signal], host: Any, rank: Any) -> list[Signal]:
    """The signals whose subject is this host and rank (a rank's crash beside its own failure line)."""
    return [s for s in signals if s.subject.get("hostname") == host and s.subject.get("rank") == rank]
