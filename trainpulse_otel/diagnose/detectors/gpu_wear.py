"""``gpu_memory_degradation``: a GPU's memory wearing out before it fails.

The evidence is the driver's: the volatile corrected-ECC count (its rate
against the GPU's own over the hour before), the row-remapper's pending and
failed flags, and the XIDs that record a remap or a high single-bit rate
(63, 92; NVIDIA's memory-error pages, see :mod:`.gpu_faults`). Nothing is lost
yet: the GPU wants a reset or service at the next drain.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ...samples import GpuKey, gpu_label
from ..spec import GPU, SignalSpec
from ..thresholds import CONVENTION, COUNT, SECONDS, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import WARNING, Finding, Policy
from .base import BaseDetector
from .gpu_faults import FAULT_SCORE, xid_rises

GPU_MEMORY_DEGRADATION = SignalSpec(
    "gpu_memory_degradation",
    "a GPU's memory wearing out: pending or failed row remaps, a rising corrected-ECC rate",
    GPU,
    0.06,
    "compute",
    predictive=True,
    policy=Policy(raise_evidence=2.5, min_observations=1, hold=0.75, clear_after_s=60.0, stale_after_s=120.0),
)
#: A worn GPU's finding scores as a failing one's with a pending or failed remap, else this.
WORN_SCORE = 2.0
#: XIDs that announce memory wearing out rather than failing: a recorded remap, a high single-bit rate.
DEGRADATION_XIDS: dict[int, str] = {
    63: "row remap recorded",
    92: "high single-bit ECC error rate",
}
WEAR_HOLD = Knob(
    "hold_s",
    600.0,
    SECONDS,
    CONVENTION,
    "a degradation XID (63, 92) keeps the signal up this long: the GPU wants a reset or service at the next drain",
    0,
)


class _Wear:
    """One GPU's corrected-ECC history over the last hour, and its degradation XIDs.

    The history holds the count's *changes* (ts, new count), so a healthy GPU
    whose count never moves costs one entry, however long it runs; the count
    at any time since ``first_ts`` is the last change at or before it.
    """

    __slots__ = ("counts", "first_ts", "history_s", "hostname", "reported", "rising", "window_s", "xid_ts", "xids")

    def __init__(self, window_s: float, history_s: float) -> None:
        self.window_s, self.history_s = window_s, history_s
        self.counts: deque[tuple[float, int]] = deque()
        self.first_ts = 0.0
        self.xids: set[int] = set()
        self.xid_ts: float | None = None
        self.hostname: str | None = None
        self.reported = False  # once a finding named the host, the subject stays as it was
        self.rising = False  # a high rate stays high while it lasts: it does not become its own baseline

    def add(self, ts: float, count: int) -> None:
        if self.counts and count < self.counts[-1][1]:
            self.counts.clear()  # the volatile counter restarted: a GPU reset or a driver reload
        if not self.counts:
            self.first_ts = ts
        if not self.counts or count != self.counts[-1][1]:
            self.counts.append((ts, count))
        while len(self.counts) >= 2 and self.counts[1][0] <= ts - self.history_s:
            self.counts.popleft()  # the entry after it already tells the count at the horizon

    def quiet(self) -> bool:
        """No corrected error within the hour, not rising, no degradation XID: nothing to judge."""
        return len(self.counts) <= 1 and not self.rising and self.xid_ts is None

    def _count_at(self, t: float) -> int:
        for at, count in reversed(self.counts):
            if at <= t:
                return count
        return self.counts[0][1]

    def rise(self, ts: float) -> tuple[int, float | None]:
        """New corrected errors in the last ``window_s``, and the per-second rate before it (None: no history)."""
        if not self.counts:
            return 0, None
        start = max(ts - self.window_s, self.first_ts)
        at_start = self._count_at(start)
        new = self.counts[-1][1] - at_start
        horizon = max(ts - self.history_s, self.first_ts)
        span = start - horizon
        return new, ((at_start - self._count_at(horizon)) / span if span >= self.window_s else None)


class GpuMemoryDegradation(BaseDetector):
    """Memory wearing out before it fails: pending or failed row remaps, XID 63/92, a rising corrected-ECC rate.

    A pending remap (the repaired row waits for a GPU reset) or a failed one
    (the bank has no spare rows left) is reported while NVML shows it. A
    corrected-ECC rate counts as rising with at least 20 new corrected errors
    in 5 minutes and at least 3x the GPU's rate over the hour before (a GPU
    that always logs a few is its own baseline); once rising it stays so while
    10 or more arrive in 5 minutes. XID 63 or 92 holds the signal
    10 minutes. Warning: nothing is lost yet, the GPU wants a reset or service
    at the next drain. Subject: the GPU (and host).
    """

    name = "gpu_memory_degradation"
    signals = (GPU_MEMORY_DEGRADATION,)
    knobs = (
        WEAR_HOLD,
        Knob("window_s", 300.0, SECONDS, CONVENTION, "the corrected-ECC rate is judged over this window", 1),
        Knob("history_s", 3600.0, SECONDS, CONVENTION, "against the GPU's own rate over this long before it", 1),
        Knob(
            "min_corrected",
            20,
            COUNT,
            CONVENTION,
            "new corrected errors within the window that count as a rising rate: a GPU that always logs a few is "
            "its own baseline",
            1,
            at_least="keep_corrected",
        ),
        Knob("rate_rise", 3.0, TIMES, CONVENTION, "the recent rate must be this many times the earlier one", 1),
        Knob("keep_corrected", 10, COUNT, CONVENTION, "once rising, it stays so while this many arrive per window", 0),
    )
    every_s = 2.0  # wear moves over minutes

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self._totals: dict[tuple[GpuKey, int], int] = {}
        self._wear: dict[GpuKey, _Wear] = {}

    def update(self, tick: Tick) -> list[Finding] | None:
        frame = tick.frame
        if not frame.gpus and not frame.xid_counts:
            return None
        host = tick.node.hostname
        for gpu, codes in xid_rises(frame, self._totals).items():
            worn = {c for c in codes if c in DEGRADATION_XIDS}
            if worn:
                wear = self._wear_of(gpu, host)
                wear.xids |= worn
                wear.xid_ts = tick.ts
        out = []
        for g, state in tick.gpu_states:
            key = state.key
            wear = self._wear_of(key, host)
            if g.ecc_corrected_errors is not None:
                wear.add(tick.ts, g.ecc_corrected_errors)
            if wear.quiet() and not (g.remapped_rows_pending or g.remapped_rows_failed):
                continue  # the healthy case, kept cheap: nothing moved within the hour
            finding = self._judge(key, wear, g.remapped_rows_pending, g.remapped_rows_failed, tick.ts)
            if finding is not None:
                out.append(finding)
        return out

    def _wear_of(self, gpu: GpuKey, host: str | None) -> _Wear:
        wear = self._wear.get(gpu)
        if wear is None:
            wear = self._wear[gpu] = _Wear(self.thresholds.window_s, self.thresholds.history_s)
        if not wear.reported:
            wear.hostname = gpu[0] or host
        return wear

    def _judge(self, gpu: GpuKey, wear: _Wear, pending: int | None, failed: int | None, ts: float) -> Finding | None:
        t = self.thresholds
        new, earlier_rate = wear.rise(ts)
        recent_rate = new / t.window_s
        if wear.rising:
            rising = new >= t.keep_corrected
        else:
            rising = new >= t.min_corrected and (earlier_rate is None or recent_rate >= t.rate_rise * earlier_rate)
        wear.rising = rising
        recent_xid = wear.xid_ts is not None and ts - wear.xid_ts <= t.hold_s
        parts, evidence = [], {"ecc_corrected_new_5m": new}
        if failed:
            parts.append("a row remap FAILED (no spare rows left)")
        if pending:
            parts.append("a row remap is pending (takes effect at the next GPU reset)")
        if recent_xid:
            codes = sorted(wear.xids)
            evidence["xid_errors"] = codes
            parts.append("XID " + ", ".join(f"{c} ({DEGRADATION_XIDS[c]})" for c in codes))
        if rising:
            parts.append(f"{new} corrected ECC errors in {t.window_s / 60:g} min ({recent_rate * 60:.1f}/min)")
        if not parts:
            return None
        evidence.update({"remapped_rows_pending": pending, "remapped_rows_failed": failed})
        if wear.counts:
            evidence["ecc_corrected_errors"] = wear.counts[-1][1]
        if earlier_rate is not None:
            evidence["ecc_corrected_rate_before_per_min"] = round(earlier_rate * 60, 3)
        subject: dict[str, Any] = {"gpu_index": gpu[1]}
        if wear.hostname is not None:
            subject["hostname"] = wear.hostname
        wear.reported = True
        message = f"{gpu_label(gpu)}'s memory is degrading: " + "; ".join(parts)
        score = FAULT_SCORE if failed or pending else WORN_SCORE
        return Finding(GPU_MEMORY_DEGRADATION.name, score, WARNING, message, subject, evidence)
