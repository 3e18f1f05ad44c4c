"""The answer key for two faults at once: whether each fault is still there in the samples.

A combination can remove a fault physically (a starved GPU never gets hot enough to throttle;
under a power cap a slowed rank is no slower than the capped others), and expecting the diagnosis
to report it would score the simulator. So ``trainpulse eval -pairs`` asks the samples first — the
raw throttle reasons, per-rank step times and tokens/s, read as a person reads a dashboard, never
through a detector — and scores a part only while its fault is there; every excused part is
listed with the reason::

    straggling(records, rank=5, onset=90.0, judge=300.0).reason
    # '' while rank 5 is slower at the judging time; else 'rank 5 is no slower than the others'

Checks exist for the faults a partner can remove; any other fault is present as long as the job
steps (or, for a fault the job's processes make, as long as they live). A fault the job's output
tells is present when its line was printed (the trace's ``event`` lines). A forecast is present
when what it forecasts comes true within its horizon, and due only where the GPU drew load long
enough to forecast from (``FORECAST_LOAD_S``). Pure: records in, reasons out. The checks, one by
one: docs/simulation.md ("trainpulse eval -pairs").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from ..collect.trace import TraceRecord
from ..diagnose.detectors.links import LINK_DEGRADATION
from ..diagnose.detectors.logged import COLLECTIVE_TIMEOUT, HOLD, NETWORK_ERROR, OUT_OF_MEMORY, RANK_CRASHED
from ..diagnose.detectors.stall_bounds import MIN_STALL_S
from ..diagnose.stats import sorted_median
from ..samples import CUDA_OOM, PROCESS_FAILED, TRANSPORT_ERROR, WATCHDOG_TIMEOUT, GpuSample, LogEvent, TrainingSample

#: NVML's throttle reasons that mean heat.
THERMAL = frozenset({"sw_thermal", "hw_thermal"})
#: How far ahead a thermal forecast looks (ThermalThrottleRisk.horizon_s), and the faults that are forecasts.
FORECAST_HORIZON_S = 900.0
FORECASTS = frozenset({"thermal_throttle_risk"})
#: The least time under load (drawing half its power limit or more), in all between the onset and judging, from
#: which a GPU's heating can be forecast: after a change of load its temperature follows the load for ~3 thermal
#: time constants (~40 s), and a drift of a few °C a minute shows above whole-degree readings only over a minute or
#: more of settled load. An idle or spinning GPU (~100 W of 700) sits far below its throttle point whatever its fan.
FORECAST_LOAD_S = 120.0
#: The signal of a link trained below its maximum: scored alone where the straggler it makes is masked.
LINK_SIGNAL = LINK_DEGRADATION.name
#: A GPU's heat signals: a forecast that could not be made is scored as either (the fact, or the forecast).
HEAT_SIGNALS = ("thermal_throttle_risk", "thermal_instability")
#: Seconds of samples a state is read over (one reading is not a state).
SPAN_S = 60.0
#: A rank this much slower than the median of the others is a straggler (the detector's own floor).
STRAGGLER = 1.10
#: Throughput this much below the partner's alone is a collapse (the detector's warning).
COLLAPSE = 0.30
#: The contract's stall: no step for 30 s (the value ``training_stalled.min_stall_s`` declares; never an override).
STALL_S = MIN_STALL_S.value
#: A loss this far above its level before the fault is a spike (the detector's 10 % floor).
SPIKE = 1.10
#: Steps a fault needs after its onset to show in them at all.
MIN_STEPS = 5
#: Faults the job's output tells: the kind of line each prints, and whether it is the fault's own rank that prints
#: it (a watchdog's timeout is printed by the ranks that wait, not by the one they wait for).
LOGGED = {
    COLLECTIVE_TIMEOUT.name: (WATCHDOG_TIMEOUT, False),
    NETWORK_ERROR.name: (TRANSPORT_ERROR, True),
    OUT_OF_MEMORY.name: (CUDA_OOM, True),
    RANK_CRASHED.name: (PROCESS_FAILED, True),
}
#: How long a logged failure's signal holds after its last line (the detectors' declared ``hold_s``).
HOLD_S = HOLD.value
#: What a line of each kind is, in the reasons.
LINE_WORDS = {
    WATCHDOG_TIMEOUT: "watchdog timeout",
    TRANSPORT_ERROR: "transport error",
    CUDA_OOM: "CUDA out-of-memory",
    PROCESS_FAILED: "crash",
}
#: Faults there whether or not the job's processes live (a GPU's hardware, another node, the job's own lines);
#: every other one is there only while they do. A job whose ranks were all ended (a crash torchrun tore down, a
#: watchdog's teardown) holds a GPU's few hundred MiB of driver memory, no more.
JOB_FREE = frozenset(LOGGED) | frozenset({"gpu_hardware_fault", "gpu_memory_degradation", "node_unreachable"})
#: A GPU holding more than this share of its memory has a live process of the job on it.
LIVE_MEMORY_SHARE = 0.10
#: Faults whose evidence is not the training steps (GPUs, the host's memory, the stall itself, heat with its
#: own check, the job's own lines): they are there whether or not the job steps.
NOT_IN_STEPS = frozenset(LOGGED) | frozenset(
    {
        "gpu_hardware_fault",
        "gpu_memory_degradation",
        "gpu_memory_leak",
        "memory_pressure",
        "oom_risk",
        "thermal_instability",
        "thermal_throttle_risk",
        "training_stalled",
        "training_stalled_no_heartbeat",
        "node_unreachable",
    }
)


@dataclass(frozen=True)
class Instead:
    """Signals any one of which stands for a part's own expected ones, and why (a forecast that could not be made:
    the fault is there and must be found, as what it already is or as the forecast)."""

    signals: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Presence:
    """Whether a part's fault is in the samples: at any time after its onset (so its expected signals are due),
    and at the judging time (so its expected cause is)."""

    ever: bool
    at_judge: bool
    reason: str  # why it is absent, in words (empty when present throughout)
    instead: Instead | None = None  # the signals scored in place of the part's own, when they could not show


def _gpus(records: Iterable[TraceRecord], start: float, end: float) -> list[tuple[float, Sequence[GpuSample]]]:
    return [(r.ts, r.payload) for r in records if r.kind == "gpus" and start <= r.ts <= end]  # type: ignore[misc]


def _training(records: Iterable[TraceRecord], start: float, end: float) -> list[tuple[float, TrainingSample]]:
    return [(r.ts, r.payload) for r in records if r.kind == "training" and start <= r.ts <= end]  # type: ignore[misc]


def _buckets(start: float, end: float) -> list[tuple[float, float]]:
    """Consecutive ``SPAN_S`` windows from ``start`` to ``end``, the last one ending at ``end``."""
    out, t = [], end
    while t - SPAN_S >= start:
        out.append((t - SPAN_S, t))
        t -= SPAN_S
    return out[::-1] or [(start, end)]


def thermal_throttling(records: Sequence[TraceRecord], gpu: int, onset: float, judge: float) -> Presence:
    """Whether GPU ``gpu`` reports a thermal throttle reason after the onset, and in the span before judging."""
    hot = [
        ts
        for ts, gpus in _gpus(records, onset, judge)
        for g in gpus
        if g.index == gpu and THERMAL & set(g.throttle_reasons)
    ]
    ever, at_judge = bool(hot), any(ts >= judge - 2 * SPAN_S for ts in hot)
    return Presence(
        ever,
        at_judge,
        "" if at_judge else f"GPU {gpu} does not throttle for heat" + ("" if ever else " at all") + " in the samples",
    )


def narrowed(records: Sequence[TraceRecord], gpu: int, onset: float, judge: float) -> Presence:
    """Whether GPU ``gpu``'s PCIe link reports fewer lanes than its maximum after the onset, and before judging."""
    narrow = [
        ts
        for ts, gpus in _gpus(records, onset, judge)
        for g in gpus
        if g.index == gpu and g.pcie_link_width and g.pcie_link_width_max and g.pcie_link_width < g.pcie_link_width_max
    ]
    ever, at_judge = bool(narrow), any(ts >= judge - 2 * SPAN_S for ts in narrow)
    return Presence(ever, at_judge, "" if at_judge else f"GPU {gpu}'s PCIe link is not narrow in the samples")


def thermal_forecast(records: Sequence[TraceRecord], gpu: int, onset: float, judge: float) -> Presence:
    """Whether GPU ``gpu`` really throttles for heat within the forecast's horizon (``records`` run on past
    ``judge`` by that horizon)."""
    hot = [
        ts
        for ts, gpus in _gpus(records, onset, judge + FORECAST_HORIZON_S)
        for g in gpus
        if g.index == gpu and THERMAL & set(g.throttle_reasons)
    ]
    at_judge = any(ts >= judge for ts in hot)
    reason = "" if at_judge else f"GPU {gpu} never reaches its throttle point within 15 min of the end"
    loaded = loaded_seconds(records, gpu, onset, judge)
    if not hot or loaded >= FORECAST_LOAD_S:
        return Presence(bool(hot), at_judge, reason)
    why = (
        f"GPU {gpu} drew its load for {loaded:.0f} s after the onset, under the {FORECAST_LOAD_S:.0f} s a heat "
        f"forecast needs: scored as {' or '.join(HEAT_SIGNALS)}"
    )
    return Presence(True, at_judge, reason, Instead(HEAT_SIGNALS, why))


def loaded_seconds(records: Sequence[TraceRecord], gpu: int, onset: float, judge: float) -> float:
    """Seconds GPU ``gpu`` drew half its power limit or more between the onset and judging (each sample standing
    for the time to the next)."""
    samples = [(ts, g) for ts, gpus in _gpus(records, onset, judge) for g in gpus if g.index == gpu]
    return sum(
        b - a
        for (a, g), (b, _) in pairwise(samples)
        if g.power_watts is not None and g.power_limit_watts and 2 * g.power_watts >= g.power_limit_watts
    )


def power_capped(records: Sequence[TraceRecord], onset: float, judge: float) -> Presence:
    """Whether most GPUs are held by their power limit (``sw_power_cap``), after the onset and before judging."""

    def capped(start: float, end: float) -> bool:
        samples = _gpus(records, start, end)
        held = sum(1 for _, gpus in samples for g in gpus if "sw_power_cap" in g.throttle_reasons)
        total = sum(len(gpus) for _, gpus in samples)
        return total > 0 and 2 * held >= total

    spans = _buckets(onset, judge)
    at_judge = capped(*spans[-1])
    ever = at_judge or any(capped(*s) for s in spans)
    return Presence(ever, at_judge, "" if at_judge else "the GPUs never reach their power limit")


def straggling(records: Sequence[TraceRecord], rank: int, onset: float, judge: float) -> Presence:
    """Whether ``rank``'s own busy step time is ``STRAGGLER`` times the other ranks' median, in a span."""

    def slower(start: float, end: float) -> float:
        ratios = []
        for _, report in _training(records, start, end):
            times = {r.rank: r.step_time_ms for r in report.ranks if r.step_time_ms}
            others = sorted(t for k, t in times.items() if k != rank)
            if rank in times and others:
                ratios.append(times[rank] / sorted_median(others))
        return sorted_median(sorted(ratios)) if ratios else 0.0

    spans = _buckets(onset, judge)
    at_judge = slower(*spans[-1]) >= STRAGGLER
    ever = at_judge or any(slower(*s) >= STRAGGLER for s in spans)
    return Presence(ever, at_judge, "" if at_judge else f"rank {rank} is no slower than the others")


def collapsing(records: Sequence[TraceRecord], without: Sequence[TraceRecord], onset: float, judge: float) -> Presence:
    """Whether tokens/s fell ``COLLAPSE`` below the same job without this fault (``without``), in a span."""

    def rate(recs: Sequence[TraceRecord], start: float, end: float) -> float:
        values = sorted(r.tokens_per_sec for _, r in _training(recs, start, end) if r.tokens_per_sec)
        return sorted_median(values) if values else 0.0

    def collapsed(start: float, end: float) -> bool:
        alone = rate(without, start, end)
        return alone > 0 and rate(records, start, end) <= (1.0 - COLLAPSE) * alone

    spans = _buckets(onset, judge)
    at_judge = collapsed(*spans[-1])
    ever = at_judge or any(collapsed(*s) for s in spans)
    return Presence(ever, at_judge, "" if at_judge else "throughput falls less than 30 % below the other fault's alone")


def _steps(records: Sequence[TraceRecord], start: float, end: float) -> list[float]:
    """When a step completed (a report with a step time; heartbeats alone are none)."""
    return [ts for ts, r in _training(records, start, end) if r.step_time_ms]


def stepping(records: Sequence[TraceRecord], onset: float, judge: float) -> Presence:
    """Whether the job completes steps after the onset, and in the span before judging (a fault in steps needs them)."""
    steps = _steps(records, onset, judge)
    ever, at_judge = len(steps) >= MIN_STEPS, any(ts >= judge - SPAN_S for ts in steps)
    reason = "" if at_judge else "the job completes no step" + (" in its last minute" if ever else " after it begins")
    return Presence(ever, at_judge, reason)


def stalled(records: Sequence[TraceRecord], onset: float, judge: float) -> Presence:
    """Whether no step completes for ``STALL_S`` after the onset, and through the ``STALL_S`` before judging."""
    steps = _steps(records, onset, judge)
    edges = [onset, *steps, judge]
    ever = any(b - a >= STALL_S for a, b in pairwise(edges))
    at_judge = judge - edges[-2] >= STALL_S
    return Presence(ever, at_judge, "" if at_judge else "the job steps again before the end")


def loss_spiking(records: Sequence[TraceRecord], onset: float, judge: float) -> Presence:
    """Whether the loss stands ``SPIKE`` times its median of the two minutes before the onset, after it and in
    the span before judging."""
    before = sorted(
        r.loss for _, r in _training(records, onset - 120.0, onset) if r.loss is not None and r.loss == r.loss
    )
    if not before:
        return Presence(False, False, "no loss before the onset to compare with")
    level = sorted_median(before)
    high = [ts for ts, r in _training(records, onset, judge) if r.loss is not None and r.loss >= SPIKE * level]
    at_judge = any(ts >= judge - SPAN_S for ts in high)
    reason = "" if at_judge else "the loss is back to its level" + ("" if high else " (no step showed the spike)")
    return Presence(bool(high), at_judge, reason)


def logged(records: Sequence[TraceRecord], kind: str, onset: float, judge: float, rank: int | None = None) -> Presence:
    """Whether the job printed a line of ``kind`` (``rank``'s, when given) after the onset and by the judging time,
    and within the ``HOLD_S`` before it (a logged failure's signal holds that long: its cause is due)."""
    printed = [
        r.ts
        for r in records
        if r.kind == "event" and onset <= r.ts <= judge and _is(r.payload, kind, rank)  # type: ignore[arg-type]
    ]
    at_judge = bool(printed) and judge - max(printed) <= HOLD_S
    whose = "" if rank is None else f" of rank {rank}"
    if not printed:
        reason = f"the job prints no {LINE_WORDS[kind]} line{whose} after the onset"
    else:
        reason = "" if at_judge else f"its last {LINE_WORDS[kind]} line is older than the {HOLD_S:.0f} s it holds"
    return Presence(bool(printed), at_judge, reason)


def _is(event: LogEvent, kind: str, rank: int | None) -> bool:
    return event.kind == kind and (rank is None or event.rank == rank)


def running(records: Sequence[TraceRecord], onset: float, judge: float) -> Presence:
    """Whether the job's processes live (some GPU holds more than ``LIVE_MEMORY_SHARE`` of its memory) through the
    ``SPAN_S`` after the onset (or to the judging time, if sooner), and at the judging time (its last GPU reading)."""
    readings = [(ts, any(_held(g) for g in gpus)) for ts, gpus in _gpus(records, onset, judge)]
    last = max((ts for ts, alive in readings if alive), default=None)
    at_judge = bool(readings) and readings[-1][1]
    ever = last is not None and (last - onset >= SPAN_S or at_judge)
    reason = "" if at_judge else "the job's processes are gone" + ("" if ever else " within a minute of it")
    return Presence(ever, at_judge, reason)


def _held(g: GpuSample) -> bool:
    return (
        bool(g.memory_used_bytes and g.memory_total_bytes)
        and g.memory_used_bytes > LIVE_MEMORY_SHARE * g.memory_total_bytes
    )  # type: ignore[operator]


Partner = Callable[[], Sequence[TraceRecord]]


def _thermal(records: Sequence[TraceRecord], _: Partner, onset: float, judge: float, subject: dict) -> Presence:
    return thermal_throttling(records, subject["gpu_index"], onset, judge)


def _forecast(records: Sequence[TraceRecord], _: Partner, onset: float, judge: float, subject: dict) -> Presence:
    return thermal_forecast(records, subject["gpu_index"], onset, judge)


def _straggler(records: Sequence[TraceRecord], _: Partner, onset: float, judge: float, subject: dict) -> Presence:
    return straggling(records, subject["rank"], onset, judge)


def _narrow_link(records: Sequence[TraceRecord], _: Partner, onset: float, judge: float, subject: dict) -> Presence:
    """A downtrained link is there while the link reports it; the straggler it makes may not be (a power cap slows
    every rank alike): then the link's own signal stands for the part's."""
    link = narrowed(records, subject["gpu_index"], onset, judge)
    slow = straggling(records, subject["rank"], onset, judge)
    if not link.ever or not slow.reason:
        return link
    return replace(link, instead=Instead((LINK_SIGNAL,), f"{slow.reason}; its link is still narrow"))


def _power_cap(records: Sequence[TraceRecord], alone: Partner, onset: float, judge: float, _: dict) -> Presence:
    """Its expected signal is the collapse, due when throughput really collapses; its cause, while GPUs are capped."""
    cause, symptom = power_capped(records, onset, judge), collapsing(records, alone(), onset, judge)
    reasons = [p.reason for p in (cause, symptom) if p.reason]
    return Presence(symptom.ever, cause.at_judge, "; ".join(reasons))


#: The check for each fault a partner can remove: (records, the partner's records alone, onset, judging time,
#: the part's subject) → Presence. ``records`` run on ``FORECAST_HORIZON_S`` past the judging time.
CHECKS: dict[str, Callable[[Sequence[TraceRecord], Partner, float, float, dict], Presence]] = {
    "thermal_instability": _thermal,
    "thermal_throttle_risk": _forecast,
    "rank_straggler": _straggler,
    LINK_SIGNAL: _narrow_link,
    "throughput_collapse": _power_cap,
    "training_stalled": lambda records, _, onset, judge, __: stalled(records, onset, judge),
    "training_stalled_no_heartbeat": lambda records, _, onset, judge, __: stalled(records, onset, judge),
    "loss_spike": lambda records, _, onset, judge, __: loss_spiking(records, onset, judge),
    **{
        name: (
            lambda records, _, onset, judge, subject, kind=kind, own=own: logged(
                records, kind, onset, judge, subject.get("rank") if own else None
            )
        )
        for name, (kind, own) in LOGGED.items()
    },
}


def presence_of(
    name: str, records: Sequence[TraceRecord], alone: Partner, onset: float, judge: float, subject: dict
) -> Presence:
    """Fault ``name``'s presence: its own check, and for a fault in training steps, that the job steps."""
    found = [CHECKS[name](records, alone, onset, judge, subject)] if name in CHECKS else []
    if name not in NOT_IN_STEPS:
        found.append(stepping(records, onset, judge))
    if name not in JOB_FREE:
        found.append(running(records, onset, judge))
    return Presence(
        all(p.ever for p in found),
        all(p.at_judge for p in found),
        "; ".join(dict.fromkeys(p.reason for p in found if p.reason)),
        next((p.instead for p in found if p.instead is not None), None),
    )
