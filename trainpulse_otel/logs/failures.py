"""Failure lines: what a job's output says when a collective, the transport, memory, a process or a GPU fails.

:class:`FailureScanner` reads one stream's lines and tells each failure as a
:class:`Failure` (an event kind of :mod:`trainpulse_otel.samples.events`, the
details the line gives, the rank or GPU it names). One-line failures are told
at their line; a multi-line report (a Python traceback, torchrun's failure
table) at the line that ends it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..samples import WATCHDOG_TIMEOUT


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failure line says: its event kind, details, and the rank or GPU it names (beyond the prefix's)."""

    kind: str
    details: Mapping[str, Any]
    rank: int | None = None
    gpu_index: int | None = None


#: NCCL's watchdog (``ProcessGroupNCCL.cpp``): ``[Rank 3] Watchdog caught collective operation timeout:
#: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, …, Timeout(ms)=1800000) ran for 1800349 milliseconds before timing out.``
NCCL_WATCHDOG = re.compile(
    r"(?:\[Rank (?P<rank>\d+)\]\s*)?Watchdog caught collective operation timeout: WorkNCCL\("
    r"SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?P<rest>.*?)\) ran for (?P<ran>\d+) milliseconds"
)
TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)")


class FailureScanner:
    """One stream's failure lines (a fresh instance per stream: multi-line reports keep state)."""

    def feed(self, text: str) -> list[Failure] | None:
        """The failures ``text`` completes, or None when it tells none."""
        if "Watchdog caught collective operation timeout" in text and (match := NCCL_WATCHDOG.search(text)):
            details: dict[str, Any] = {"op": match["op"], "seq": int(match["seq"]), "ran_ms": int(match["ran"])}
            if timeout := TIMEOUT_MS.search(match["rest"]):
                details["timeout_ms"] = int(timeout[1])
            if match["rank"] is not None:  # the rank in its process group: the global one is the line's prefix's
                details["pg_rank"] = int(match["rank"])
            return [Failure(WATCHDOG_TIMEOUT, details)]
        return None
