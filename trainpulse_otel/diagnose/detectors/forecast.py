"""Predictive signal ``oom_risk``: GPU or host memory forecast to run out (and the line fits the forecasts share).

:class:`Forecaster` fits straight lines to the recent past over several windows (``MEMORY_SPANS``
for memory; ``thermal_throttle_risk`` uses it over 1 and 3 minutes) and takes the earliest time to
the limit among the fits it trusts: enough points, a slope that is not noise (its t statistic), a
line that explains the data (r²: a one-off jump is a step, not a trend) and a material change over
the window. The short window sees a sudden leak within seconds; the long ones a slow leak that
hides in noise at short range.

A ramp that ends is no leak: memory is forecast only after ``startup_s`` of watching (a process's
first minute is its allocation phase), and the later half of a window must still move at
``min_recent_rate`` of the fitted rate. Points are thinned and fits run every 2 s (host) or 4 s
(GPUs). The knobs, the method and the measurements behind it: docs/signals.md ("oom_risk").
"""

from __future__ import annotations

from typing import Any

from ...samples import gpu_label, gpu_subject
from ..spec import GPU, SignalSpec
from ..stats import Trend, t_stat
from ..thresholds import CONVENTION, MEASURED, PHYSICS, SECONDS, SHARE, T_STAT, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import SCORE_CAP, BaseDetector
from .memory import GIB, host_subject

OOM_RISK = SignalSpec(
    "oom_risk",
    "GPU or host memory forecast to run out",
    GPU,
    0.15,
    "compute",
    predictive=True,
    policy=Policy(raise_evidence=2.0, clear_after_s=30.0),
)
#: Seconds between a memory series' points, and between its fits (the GPU's are thinned more: see each class).
SAMPLE_EVERY_S = 2.0
EVALUATE_EVERY_S = 4.0
#: Points a window needs, and the share of its span they must cover, before a line is fitted to it.
MIN_POINTS = 8
MIN_COVERED = 0.5
#: A window that moved less than this share of the change a fit needs is rejected before fitting (cheap).
PRECHECK_CHANGE = 0.5
#: Memory's windows (s): a sudden leak is seen within seconds, a slow one that hides in noise over minutes.
MEMORY_SPANS = (15.0, 30.0, 120.0, 600.0)
#: A job that stops this long after an alarm, around its forecast time (with this much slack, at least), and
#: whose memory is freed, ran out: the finding then says so, scored this much.
STOPPED_FOR_S = 5.0
RAN_OUT_SLACK_S = 120.0
RAN_OUT_SCORE = 2.0


class Forecaster:
    """A series fitted over several trailing windows; ``eta`` is the earliest trusted time to a limit."""

    __slots__ = (
        "_first_ts",
        "_last_ts",
        "min_change",
        "min_r2",
        "min_recent_rate",
        "min_t",
        "settle_s",
        "spans",
        "trend",
    )

    def __init__(
        self,
        spans: tuple[float, ...],
        every_s: float,
        t: Thresholds,
        min_r2: float,
        min_change: float,
        settle_s: float = 0.0,
    ) -> None:
        """A forecaster judged by the detector's ``min_t`` and ``min_recent_rate`` knobs (``t``)."""
        self.trend = Trend(max(spans), every_s)
        self.spans = spans
        self.min_r2 = min_r2
        self.min_change = min_change
        self.min_t = t.min_t
        self.min_recent_rate = t.min_recent_rate
        self.settle_s = settle_s
        self._first_ts: float | None = None
        self._last_ts = 0.0

    def add(self, ts: float, y: float) -> None:
        if self._first_ts is None:
            self._first_ts = ts
        self._last_ts = ts
        self.trend.add(ts, y)

    def eta(self, limit: float) -> tuple[float, float, float, float] | None:
        """``(seconds to limit, slope per second, fitted value now, window s)`` of the earliest trusted fit."""
        if self._first_ts is None or self._last_ts - self._first_ts < self.settle_s:
            return None
        best = None
        trend = self.trend
        for span in self.spans:
            points, covered, change = trend.window(span)
            # cheap rejections first: too little data, or the value barely moved
            if points < MIN_POINTS or covered < MIN_COVERED * span or abs(change) < PRECHECK_CHANGE * self.min_change:
                continue
            fit = trend.fit(span)
            if fit is None:
                continue
            slope, now, r2, n = fit
            if slope == 0 or r2 < self.min_r2 or t_stat(r2, n) < self.min_t:
                continue
            if abs(slope) * covered < self.min_change:
                continue
            if _past(now, limit, slope):
                eta = 0.0
            elif (limit - now) * slope < 0:
                continue  # moving away from the limit
            else:
                eta = (limit - now) / slope
            if not self._still_moving(covered, slope):
                continue
            if best is None or eta < best[0]:
                best = (eta, slope, now, span)
        return best

    def _still_moving(self, covered: float, slope: float) -> bool:
        """Whether the later half of the ``covered`` seconds a fit spans still moves its way, at a quarter of its
        rate (a jump in the middle of a flat series fits a line well enough; only one of its halves moves)."""
        _, covered, change = self.trend.window(0.5 * covered)
        return change * slope > 0 and abs(change) >= self.min_recent_rate * abs(slope) * covered


def _past(now: float, limit: float, slope: float) -> bool:
    """True when ``now`` is already at or past ``limit`` in the direction the series moves."""
    return now >= limit if slope > 0 else now <= limit


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class _Memory:
    """One memory series (a GPU's used fraction or the host's available fraction)."""

    __slots__ = ("alarm", "forecaster", "last", "limit")

    def __init__(self, forecaster: Forecaster, limit: float) -> None:
        self.forecaster = forecaster
        self.limit = limit
        self.alarm: tuple[float, float, float] | None = None  # (ts, eta, value) of the last forecast within horizon
        self.last: float | None = None


#: Knobs both memory forecasts share (one value each: an override applies to the GPU's and the host's).
OOM_KNOBS = (
    Knob(
        "horizon_s",
        1800.0,
        SECONDS,
        CONVENTION,
        "warning when memory runs out within 30 min: time to checkpoint and restart before it does",
        1,
        at_least="critical_s",
    ),
    Knob("critical_s", 600.0, SECONDS, CONVENTION, "critical within 10 min: about one checkpoint interval", 0),
    Knob(
        "min_t",
        6.0,
        T_STAT,
        CONVENTION,
        "the fitted slope's t statistic: a trend, not noise (far past the usual 3: many windows are tried)",
        0,
    ),
    Knob(
        "min_change",
        0.005,
        SHARE,
        CONVENTION,
        "the least a fit may move over its window (of the total): a flat series forecasts nothing",
        0,
        1,
    ),
    Knob(
        "startup_s",
        60.0,
        SECONDS,
        MEASURED,
        "a memory series is forecast only after this long: a process's first minute is its allocation phase "
        "(a real gloo job filled ~1 GB in its first 10 s, then stayed flat)",
        0,
    ),
    Knob(
        "min_recent_rate",
        0.25,
        SHARE,
        CONVENTION,
        "the later half of a window must still move at this share of the fitted rate: a ramp that ended is no trend",
        0,
        1,
    ),
)


class _OomRisk(BaseDetector):
    """``oom_risk``: memory forecast to run out (the GPU and host variants below).

    Warning when the forecast time to exhaustion is under ``horizon_s`` (30 min), critical
    under ``critical_s`` (10 min); the evidence carries ``eta_s``, the rate and the window.
    When the job stops around the forecast time — every GPU idle, no step, and
    the memory suddenly freed — the signal stays, critical, saying memory ran
    out, until training reports again: the dashboard then tells why the job
    died instead of going quiet.
    """

    signals = (OOM_RISK,)
    sample_every_s = SAMPLE_EVERY_S
    evaluate_every_s = EVALUATE_EVERY_S

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.horizon_s, self.critical_s = t.horizon_s, t.critical_s
        self._series: dict[Any, _Memory] = {}
        self._next_sample = self._next_eval = float("-inf")
        self._stopped_since: float | None = None

    @property
    def freed_by(self) -> float:
        """How far the value must jump back (a share of the total) to count as freed by a dying job."""
        raise NotImplementedError

    def update(self, tick: Tick) -> list[Finding] | None:
        ts = tick.ts
        if tick.report is not None or not tick.paused:
            self._stopped_since = None
        elif self._stopped_since is None:
            self._stopped_since = ts
        if ts >= self._next_sample:
            self._next_sample = ts + self.sample_every_s
            self._sample(tick)
        if ts < self._next_eval:
            return None
        self._next_eval = ts + self.evaluate_every_s
        out: list[Finding] = []
        for key, memory in self._series.items():
            finding = self._judge(memory, ts, *self._describe(key, tick))
            if finding is not None:
                out.append(finding)
        return out

    def _sample(self, tick: Tick) -> None:
        raise NotImplementedError

    def _describe(self, key: Any, tick: Tick) -> tuple[dict[str, Any], str]:
        """The subject and the words for the series under ``key``."""
        raise NotImplementedError

    def _add(self, key: Any, ts: float, value: float, limit: float, min_r2: float) -> None:
        memory = self._series.get(key)
        if memory is None:
            t = self.thresholds
            forecaster = Forecaster(MEMORY_SPANS, self.sample_every_s, t, min_r2, t.min_change, t.startup_s)
            memory = self._series[key] = _Memory(forecaster, limit)
        memory.last = value
        memory.forecaster.add(ts, value)

    def _judge(self, memory: _Memory, ts: float, subject: dict[str, Any], what: str) -> Finding | None:
        ran_out = self._ran_out(memory, ts)
        if ran_out is not None:
            return Finding(
                OOM_RISK.name,
                RAN_OUT_SCORE,
                CRITICAL,
                f"{what} ran out: training stopped {ran_out}",
                subject,
                {"eta_s": 0.0, "stopped_at": self._stopped_since},
            )
        forecast = memory.forecaster.eta(memory.limit)
        if forecast is None:
            return None
        eta, slope, now, window = forecast
        score = min(SCORE_CAP, self.horizon_s / max(eta, 1.0))
        if score < self.report_floor:
            return None
        if score >= 1.0:
            memory.alarm = (ts, eta, now)
        severity = CRITICAL if eta <= self.critical_s else WARNING
        evidence = {
            "eta_s": round(eta, 1),
            "rate_fraction_per_s": round(slope, 7),
            "fraction_now": round(now, 4),
            "limit_fraction": round(memory.limit, 4),
            "window_s": window,
        }
        message = f"{what} will run out in ~{minutes(eta)} at the current trend"
        return Finding(OOM_RISK.name, score, severity, message, subject, evidence)

    def _ran_out(self, memory: _Memory, ts: float) -> str | None:
        """How long ago training stopped, if it stopped when this memory was forecast to run out and was freed."""
        stopped, alarm, last = self._stopped_since, memory.alarm, memory.last
        if stopped is None or alarm is None or ts - stopped < STOPPED_FOR_S or last is None:
            return None
        alarm_ts, eta, value = alarm
        if not alarm_ts + eta - max(RAN_OUT_SLACK_S, 0.5 * eta) <= stopped <= alarm_ts + eta + RAN_OUT_SLACK_S:
            return None
        rising = memory.limit > value  # used memory grows toward the limit; available memory falls
        freed = last < value - self.freed_by if rising else last > value + self.freed_by
        return f"{ts - stopped:.0f} s ago, when the forecast said it would" if freed else None


class GpuOomRisk(_OomRisk):
    """``oom_risk`` on a GPU: ``used / total`` trending up to 99.5 %.

    The fit must explain the data well (r² >= 0.9: allocations grow in steps,
    and one step is not a leak) and have moved 0.5 % of the device over its
    window. Points and fits every 4 s. Subject: the GPU.
    """

    name = "gpu_oom"
    knobs = (
        *OOM_KNOBS,
        Knob("gpu_limit", 0.995, SHARE, PHYSICS, "of the device's memory: where the next allocation fails", 0, 1),
        Knob(
            "gpu_min_r2", 0.9, SHARE, CONVENTION, "r² of the fit: allocations grow in steps, one step is no leak", 0, 1
        ),
        Knob("gpu_freed", 0.2, SHARE, CONVENTION, "memory freed (of the total) when a process dies of OOM", 0, 1),
    )
    sample_every_s = 4.0
    evaluate_every_s = 4.0

    @property
    def freed_by(self) -> float:
        return self.thresholds.gpu_freed

    def _sample(self, tick: Tick) -> None:
        t = self.thresholds
        for g, state in tick.gpu_states:
            if g.memory_used_bytes is not None and g.memory_total_bytes:
                self._add(state.key, tick.ts, g.memory_used_bytes / g.memory_total_bytes, t.gpu_limit, t.gpu_min_r2)

    def _describe(self, key: Any, tick: Tick) -> tuple[dict[str, Any], str]:
        return gpu_subject(key), f"{gpu_label(key)} memory"


class HostOomRisk(_OomRisk):
    """``oom_risk`` on the host: ``available / total`` trending down to 1 % (at least 1 GiB).

    r² >= 0.8 (host memory is noisier), and a move of 0.5 % of the total over
    the window. Points every second, fits every 2 s. Subject: the host.
    """

    name = "host_oom"
    knobs = (
        *OOM_KNOBS,
        Knob(
            "host_limit", 0.01, SHARE, PHYSICS, "of host memory available (and at least 1 GiB): the OOM killer's", 0, 1
        ),
        Knob("host_min_r2", 0.8, SHARE, CONVENTION, "r² of the fit: host memory is noisier than a GPU's", 0, 1),
        Knob("host_freed", 0.05, SHARE, CONVENTION, "memory freed (of the total) when a process dies of OOM", 0, 1),
    )
    sample_every_s = 1.0
    evaluate_every_s = 2.0

    @property
    def freed_by(self) -> float:
        return self.thresholds.host_freed

    def _sample(self, tick: Tick) -> None:
        t = self.thresholds
        for node, host in tick.hosts():
            if host.memory_available_bytes is not None and host.memory_total_bytes:
                limit = max(t.host_limit, GIB / host.memory_total_bytes)
                available = host.memory_available_bytes / host.memory_total_bytes
                self._add(("host", node), tick.ts, available, limit, t.host_min_r2)

    def _describe(self, key: Any, tick: Tick) -> tuple[dict[str, Any], str]:
        node = key[1]
        return host_subject(tick, node), "host memory" if node is None else f"host memory of {node}"
