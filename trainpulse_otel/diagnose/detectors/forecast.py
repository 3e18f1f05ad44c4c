"""Predictive signals: memory running out (``oom_risk``), a GPU reaching its throttle point (``thermal_throttle_risk``).

Both fit straight lines to the recent past over several windows (15 s, 30 s,
2 min and 10 min for memory; 1 and 3 min for temperature) and take the earliest time
to the limit among the fits they trust: enough points, a slope that is not
noise (t statistic >= 6 for memory, >= 5 for temperature read as whole
degrees), a line that explains the data (r² — a one-off jump
in memory is a step, not a trend, and fits a line badly) and a material change
over the window. The short window sees a sudden leak within seconds; the long
ones see slow leaks that hide in noise at short range.

Points are thinned (host memory one a second, GPU series one every 2 s) and
the fits run every 2 s (host) or 4 s (GPUs): a forecast in minutes needs no
more, and it keeps the tick cheap.
"""

from __future__ import annotations

import math
from typing import Any

from ..stats import RobustBaseline, Trend, t_stat
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import SCORE_CAP, BaseDetector
from .memory import GIB, host_subject

SAMPLE_EVERY_S = 2.0
EVALUATE_EVERY_S = 4.0
MIN_POINTS = 8
MIN_T_STAT = 6.0


class Forecaster:
    """A series fitted over several trailing windows; ``eta`` is the earliest trusted time to a limit."""

    __slots__ = ("min_change", "min_r2", "min_t", "spans", "trend")

    def __init__(
        self, spans: tuple[float, ...], every_s: float, min_r2: float, min_change: float, min_t: float = MIN_T_STAT
    ) -> None:
        self.trend = Trend(max(spans), every_s)
        self.spans = spans
        self.min_r2 = min_r2
        self.min_change = min_change
        self.min_t = min_t

    def add(self, ts: float, y: float) -> None:
        self.trend.add(ts, y)

    def eta(self, limit: float) -> tuple[float, float, float, float] | None:
        """``(seconds to limit, slope per second, fitted value now, window s)`` of the earliest trusted fit."""
        best = None
        trend = self.trend
        for span in self.spans:
            points, covered, change = trend.window(span)
            # cheap rejections first: too little data, or the value barely moved
            if points < MIN_POINTS or covered < 0.5 * span or abs(change) < 0.5 * self.min_change:
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
            if best is None or eta < best[0]:
                best = (eta, slope, now, span)
        return best


def _past(now: float, limit: float, slope: float) -> bool:
    """True when ``now`` is already at or past ``limit`` in the direction the series moves."""
    return now >= limit if slope > 0 else now <= limit


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class _Memory:
    """One memory series (a GPU's used fraction or the host's available fraction)."""

    __slots__ = ("alarm", "forecaster", "last", "limit")

    def __init__(self, forecaster: Forecaster, limit: float) -> None:
        self.forecaster = forecaster
        self.limit = limit
        self.alarm: tuple[float, float, float] | None = None  # (ts, eta, value) of the last forecast within horizon
        self.last: float | None = None


class _OomRisk(BaseDetector):
    """``oom_risk``: memory forecast to run out (the GPU and host variants below).

    Warning when the forecast time to exhaustion is under 30 min, critical
    under 10 min; the evidence carries ``eta_s``, the rate and the window.
    When the job stops around the forecast time — every GPU idle, no step, and
    the memory suddenly freed — the signal stays, critical, saying memory ran
    out, until training reports again: the dashboard then tells why the job
    died instead of going quiet.
    """

    signals = ("oom_risk",)
    policy = Policy(raise_evidence=2.0, clear_after_s=30.0)
    horizon_s = 1800.0
    critical_s = 600.0
    sample_every_s = SAMPLE_EVERY_S
    evaluate_every_s = EVALUATE_EVERY_S
    #: How far the value must jump back (fraction of the total) to count as freed by a dying job.
    freed_by = 0.05

    def __init__(self) -> None:
        self._series: dict[Any, _Memory] = {}
        self._next_sample = self._next_eval = float("-inf")
        self._stopped_since: float | None = None

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
            memory = self._series[key] = _Memory(
                Forecaster((15.0, 30.0, 120.0, 600.0), self.sample_every_s, min_r2, 0.005), limit
            )
        memory.last = value
        memory.forecaster.add(ts, value)

    def _judge(self, memory: _Memory, ts: float, subject: dict[str, Any], what: str) -> Finding | None:
        ran_out = self._ran_out(memory, ts)
        if ran_out is not None:
            return Finding(
                "oom_risk",
                2.0,
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
        message = f"{what} will run out in ~{_minutes(eta)} at the current trend"
        return Finding("oom_risk", score, severity, message, subject, evidence)

    def _ran_out(self, memory: _Memory, ts: float) -> str | None:
        """How long ago training stopped, if it stopped when this memory was forecast to run out and was freed."""
        stopped, alarm, last = self._stopped_since, memory.alarm, memory.last
        if stopped is None or alarm is None or ts - stopped < 5.0 or last is None:
            return None
        alarm_ts, eta, value = alarm
        if not alarm_ts + eta - max(120.0, 0.5 * eta) <= stopped <= alarm_ts + eta + 120.0:
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
    sample_every_s = 4.0
    evaluate_every_s = 4.0
    freed_by = 0.2

    def _sample(self, tick: Tick) -> None:
        for g in tick.gpus:
            if g.memory_used_bytes is not None and g.memory_total_bytes:
                self._add(g.index, tick.ts, g.memory_used_bytes / g.memory_total_bytes, 0.995, 0.9)

    def _describe(self, key: Any, tick: Tick) -> tuple[dict[str, Any], str]:
        return {"gpu_index": key}, f"GPU {key} memory"


class HostOomRisk(_OomRisk):
    """``oom_risk`` on the host: ``available / total`` trending down to 1 % (at least 1 GiB).

    r² >= 0.8 (host memory is noisier), and a move of 0.5 % of the total over
    the window. Points every second, fits every 2 s. Subject: the host.
    """

    name = "host_oom"
    sample_every_s = 1.0
    evaluate_every_s = 2.0

    def _sample(self, tick: Tick) -> None:
        host = tick.host
        if host is not None and host.memory_available_bytes is not None and host.memory_total_bytes:
            limit = max(0.01, GIB / host.memory_total_bytes)
            self._add("host", tick.ts, host.memory_available_bytes / host.memory_total_bytes, limit, 0.8)

    def _describe(self, key: Any, tick: Tick) -> tuple[dict[str, Any], str]:
        return host_subject(tick), "host memory"


#: Where a GPU's thermal slowdown engages when it has never been seen throttling (H100/A100 SXM ~87–90 °C).
DEFAULT_THROTTLE_C = 87.0
#: Seconds over which a rise in power draw counts as more load (the longest temperature fit).
POWER_SPAN_S = 180.0
#: How fast the usual full-load temperature is forgotten (1 °C per 10 min).
USUAL_HIGH_DECAY_C_PER_S = 1.0 / 600.0
#: Seconds of load before a GPU's temperature is judged: it settles within ~3 thermal time constants.
SETTLE_S = 60.0
#: The lowest throttle point learned from observation (a reading below it is a sensor quirk).
MIN_THROTTLE_C = 70.0


class _GpuHeat:
    """One GPU's temperature and power series, its busy baseline and usual peak, its throttle point."""

    __slots__ = ("baseline", "forecaster", "power", "throttle_c", "usual_high")

    def __init__(self) -> None:
        self.baseline = RobustBaseline(alpha=0.02, warmup=15, band=4.0, min_scale=0.5)
        self.forecaster = _heat_forecaster()
        self.power = _power_trend()
        self.throttle_c = DEFAULT_THROTTLE_C
        self.usual_high = -math.inf

    def learn(self, temp: float, dt: float) -> None:
        """Update the baseline and the slowly forgotten peak of it (the GPU's usual temperature at full load)."""
        base = self.baseline
        base.update(temp)
        if base.ready:
            self.usual_high = max(self.usual_high - USUAL_HIGH_DECAY_C_PER_S * dt, base.loc)


def _heat_forecaster() -> Forecaster:
    return Forecaster((60.0, 180.0), ThermalThrottleRisk.every_s, min_r2=0.5, min_change=1.5, min_t=5.0)


def _power_trend() -> Trend:
    """Power draw read as often as the temperature: the series' size is set by the span, not the tick interval."""
    return Trend(POWER_SPAN_S, ThermalThrottleRisk.every_s)


class ThermalThrottleRisk(BaseDetector):
    """``thermal_throttle_risk``: a GPU's temperature forecast to reach its throttle point.

    Statistic per GPU: the temperature, read every 2 s and fitted over 1 and 3
    minutes every 4 s while the GPU is busy (a least-squares fit shrugs off a
    one-reading sensor blip); the throttle point is 87 °C, or the lowest
    temperature this GPU was seen thermally throttled at. Judged after a
    minute of load (warming back up after an idle spell is not a risk), when
    the fitted temperature is at least 0.5 °C above the GPU's usual full-load
    temperature (the peak of its busy baseline, forgotten at 1 °C per 10 min,
    so a GPU warming back up after a lighter spell is not at risk), its power
    draw did not rise by 5 % of its limit over the last 3 minutes (more load
    warms a GPU to a new level where it settles; failing cooling — a fan, a
    cold plate, the room — warms it at the same power), it is not cooling over
    the 3-minute window (a rebound after a lighter spell warms fast, briefly),
    it is not already throttling (that is ``thermal_instability``), and it
    rose 1.5 °C or more over the window.
    Warning when the forecast is under 15 min, critical under 3 min;
    ``eta_s`` in the evidence. Subject: the GPU.
    """

    name = "thermal_risk"
    signals = ("thermal_throttle_risk",)
    policy = Policy(raise_evidence=2.0, clear_after_s=60.0)
    every_s = 2.0
    evaluate_every_s = 4.0
    horizon_s = 900.0
    critical_s = 180.0
    margin_c = 0.5
    #: A power rise over the last minute this large (share of the power limit) means more load, not worse cooling.
    load_rise = 0.05

    def __init__(self) -> None:
        self._gpus: dict[int, _GpuHeat] = {}
        self._next_eval = float("-inf")

    def throttle_celsius(self, index: int) -> float:
        """The temperature GPU ``index`` is expected to throttle at."""
        heat = self._gpus.get(index)
        return heat.throttle_c if heat is not None else DEFAULT_THROTTLE_C

    def update(self, tick: Tick) -> list[Finding] | None:
        self._sample(tick)
        if tick.ts < self._next_eval:
            return None
        self._next_eval = tick.ts + self.evaluate_every_s
        out = []
        for index, heat in self._gpus.items():
            finding = self._judge(index, heat, tick)
            if finding is not None:
                out.append(finding)
        return out

    def _sample(self, tick: Tick) -> None:
        for g in tick.gpus:
            temp = g.temperature_celsius
            if temp is None:
                continue
            state = tick.node.gpus[g.index]
            heat = self._gpus.get(g.index)
            if heat is None:
                heat = self._gpus[g.index] = _GpuHeat()
            if state.last_thermal_ts == tick.ts:  # throttling now: this is where its slowdown engages
                heat.throttle_c = max(MIN_THROTTLE_C, min(heat.throttle_c, temp))
            if state.busy_for(tick.ts) < SETTLE_S:  # warming up after idling is not a risk
                if len(heat.forecaster.trend):
                    heat.forecaster, heat.power = _heat_forecaster(), _power_trend()
                continue
            heat.forecaster.add(tick.ts, temp)
            if g.power_watts is not None:
                heat.power.add(tick.ts, g.power_watts)
            heat.learn(temp, self.every_s)

    def _judge(self, index: int, heat: _GpuHeat, tick: Tick) -> Finding | None:
        state = tick.node.gpus.get(index)
        if state is None or state.busy_for(tick.ts) < SETTLE_S or not heat.baseline.ready:
            return None
        if state.last_thermal_ts is not None and tick.ts - state.last_thermal_ts < 30.0:
            return None
        forecast = heat.forecaster.eta(heat.throttle_c)
        if forecast is None:
            return None
        eta, slope, now, window = forecast
        if slope <= 0 or now < heat.usual_high + self.margin_c:
            return None  # not above its usual full-load temperature: warming back up is no risk
        longest = heat.forecaster.trend.fit(heat.forecaster.spans[-1])
        if longest is not None and longest[0] <= 0:
            return None  # cooling over minutes, warming over seconds: a rebound of load, not a trend
        if state.limit and heat.power.window(POWER_SPAN_S)[2] >= self.load_rise * state.limit:
            return None  # it draws more power: the load grew, the temperature follows and will settle
        score = min(SCORE_CAP, self.horizon_s / max(eta, 1.0))
        if score < self.report_floor:
            return None
        severity = CRITICAL if eta <= self.critical_s else WARNING
        evidence: dict[str, Any] = {
            "eta_s": round(eta, 1),
            "temperature_celsius": round(now, 1),
            "throttle_celsius": heat.throttle_c,
            "rate_celsius_per_min": round(slope * 60, 2),
            "usual_celsius": round(heat.usual_high, 1),
            "window_s": window,
        }
        message = (
            f"GPU {index} is heating {slope * 60:.1f} °C/min ({now:.0f} °C now) and will reach its "
            f"{heat.throttle_c:.0f} °C throttle point in ~{_minutes(eta)}"
        )
        return Finding("thermal_throttle_risk", score, severity, message, {"gpu_index": index}, evidence)
