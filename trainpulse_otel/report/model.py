"""The report's model: a run's recorded series (:meth:`.series.RunSeries.to_dict`) in, what each section shows out.

Pure: plain data in, a :class:`Report` of plain data out (times in seconds since the run's first tick; a value
the run did not report is ``None``). Nothing here draws or escapes; :mod:`.charts` and :mod:`.page` do.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .series import LOSS_SIGNALS, STEP_PARTS

#: How long before a fault's raise and after its clear its GPUs are shown (seconds).
FAULT_MARGIN_S = 60.0
#: Faults whose GPUs get a panel (the first raised); the timeline shows them all.
MAX_FAULT_PANELS = 6
#: The throughputs a run may report, in the order the report prefers them: (series, what the chart calls it).
THROUGHPUTS = (
    ("tokens_per_sec", "tokens/s"),
    ("samples_per_sec", "samples/s"),
    ("tflops", "TFLOP/s per GPU"),
)
STEPS_PER_SEC = "steps/s (from the step time)"
#: The most loss-signal raises marked on the loss chart (the first; the timeline shows them all).
MAX_LOSS_MARKS = 40


@dataclass(frozen=True)
class SignalBar:
    """One signal from raised to cleared (``end`` None: still active at the end)."""

    signal: str
    severity: str
    subject: str
    start: float
    end: float | None
    message: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)  # the subject as the signal gave it


@dataclass(frozen=True)
class Fault:
    """A fault's GPUs around it: each GPU's (time, temperature, SM clock, power) rows, over ``span`` (seconds
    since the run's start; the fault itself from ``bar.start`` to ``bar.end``, or to the span's end)."""

    bar: SignalBar
    gpus: Mapping[str, list[tuple[float, float | None, float | None, float | None]]]
    span: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class Losses:
    """The job's loss and grad norm over its steps: ``x`` each point's step (or, when a report gave none or the
    steps went back, its ordinal among the run's loss reports: ``x_label`` says which); a value the report did
    not carry is None, a non-finite one stays NaN or ±inf. ``marks``: (x, signal, severity) of each loss_spike
    and nonfinite_loss raise."""

    x: list[float]
    x_label: str
    loss: list[float | None]
    grad_norm: list[float | None]
    marks: list[tuple[float, str, str]] = field(default_factory=list)
    reports: int = 0


@dataclass(frozen=True)
class Throughput:
    """The run's throughput as the chart shows it: which (``label``) and its values, point by point."""

    name: str
    label: str
    values: list[float | None]


@dataclass(frozen=True)
class Report:
    """Everything the page shows, section by section."""

    title: str
    start_ts: float
    duration_s: float
    ticks: int
    health: Mapping[str, Any]
    times: list[float]
    series: Mapping[str, list[float | None]]
    step_parts: Mapping[str, list[float | None]]
    goodput: Mapping[str, Any] | None
    badput_over_time: Mapping[str, list[float | None]]
    bars: list[SignalBar]
    heat_ranks: list[int]
    heat: list[list[float | None]]
    faults: list[Fault]
    causes: list[Mapping[str, Any]]
    signals: list[str] = field(default_factory=list)
    losses: Losses | None = None
    throughput: Throughput | None = None
    #: Whether any tick had a GPU reading (a log has none).
    has_gpus: bool = True
    #: What the logs the run was read from amounted to (:meth:`~trainpulse_otel.logs.account.LogAccount.to_dict`,
    #: with its ``summary`` sentence); None for a trace or a daemon's run.
    log_account: Mapping[str, Any] | None = None
    #: Each GPU's, port's and node's risk of interrupting the job at the run's end, riskiest first (may be empty).
    node_risk: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def top_cause(self) -> str | None:
        return self.causes[0]["cause"] if self.causes else None

    @property
    def job(self) -> Mapping[str, Any] | None:
        """The goodput's ``job`` block: the job's attempts across restarts and its checkpoints (None: not known)."""
        return (self.goodput or {}).get("job")

    @property
    def restarts_s(self) -> list[float]:
        """When each attempt after the first began, in seconds since the run's first tick."""
        attempts = (self.job or {}).get("attempts") or ()
        return [a["start"] - self.start_ts for a in attempts[1:] if isinstance(a.get("start"), (int, float))]


def build_report(run: Mapping[str, Any], title: str) -> Report:
    """The report of one run's recorded data (see the module docstring)."""
    points: Sequence[Mapping[str, Any]] = run["points"]
    start = run.get("first_ts") or (points[0]["ts"] if points else 0.0)
    times = [p["ts"] - start for p in points]
    bars = signal_bars(run["transitions"], start, times[-1] if times else 0.0)
    diagnosis = run["diagnosis"]
    ranks, heat = heat_map(points)
    return Report(
        title=title,
        start_ts=start,
        duration_s=times[-1] if times else 0.0,
        ticks=run["ticks"],
        health=diagnosis["health"],
        times=times,
        series={
            name: column(points, name)
            for name in ("health", *(n for n, _ in THROUGHPUTS), "mfu", "step_time_ms", "goodput")
        },
        step_parts=step_parts(points),
        goodput=diagnosis.get("goodput"),
        badput_over_time=badput_columns(points),
        bars=bars,
        heat_ranks=ranks,
        heat=heat,
        faults=faults(bars, points, start, run.get("rank_gpus", {})),
        causes=ranked_causes(run["causes"], (diagnosis.get("goodput") or {}).get("badput_s", {})),
        signals=sorted({b.signal for b in bars}),
        losses=losses(run.get("losses", ()), run["transitions"], run.get("loss_reports", 0)),
        throughput=throughput(points),
        has_gpus=any("gpus" in p for p in points),
        log_account=run.get("log_account"),
        node_risk=list(diagnosis.get("node_risk") or ()),
    )


def throughput(points: Sequence[Mapping[str, Any]]) -> Throughput | None:
    """The first throughput the run reported (tokens/s, samples/s, TFLOP/s per GPU), else steps/s from its step
    time; None when it reported none of them."""
    for name, label in THROUGHPUTS:
        values = column(points, name)
        if any(v is not None for v in values):
            return Throughput(name, label, values)
    steps = [1000.0 / ms if ms else None for ms in column(points, "step_time_ms")]
    return Throughput("steps_per_sec", STEPS_PER_SEC, steps) if any(v is not None for v in steps) else None


def losses(rows: Sequence[Sequence[Any]], transitions: Sequence[Mapping[str, Any]], reports: int = 0) -> Losses | None:
    """The kept losses (:attr:`.series.RunSeries.losses` rows) on their steps, and the loss signals' raises on
    the same axis; None when the job reported no loss and no grad norm."""
    if not rows:
        return None
    steps = [r[1] for r in rows]
    by_step = all(s is not None for s in steps) and all(a <= b for a, b in itertools.pairwise(steps))
    x = [float(s) for s in steps] if by_step else [float(r[0]) for r in rows]
    reported = list(itertools.accumulate((r[2] for r in rows), max))  # by then (sorted, as a merged log is)
    marks: list[tuple[float, str, str]] = []
    for t in transitions:
        if t["event"] != "raised" or t["signal"] not in LOSS_SIGNALS:
            continue
        if by_step and t.get("step") is not None:
            at = float(t["step"])
        else:  # the last loss reported by the time it was raised
            at = x[max(bisect.bisect_right(reported, t["ts"] + 1e-6) - 1, 0)]
        if (at, t["signal"], t["severity"]) not in marks:
            marks.append((at, t["signal"], t["severity"]))
        if len(marks) >= MAX_LOSS_MARKS:
            break
    return Losses(
        x,
        "step" if by_step else "loss report (in the order reported)",
        [r[3] for r in rows],
        [r[4] for r in rows],
        marks,
        reports or len(rows),
    )


def ranked_causes(causes: Sequence[Mapping[str, Any]], badput_s: Mapping[str, float]) -> list[Mapping[str, Any]]:
    """The run's causes, the one it lost the most time to first (then the one ranked first for the most ticks):
    the first is the run's top cause."""
    return sorted(causes, key=lambda c: (-badput_s.get(c["cause"], 0.0), -c["top_ticks"], -c["confidence"]))


def column(points: Sequence[Mapping[str, Any]], name: str) -> list[float | None]:
    return [p.get(name) for p in points]


def step_parts(points: Sequence[Mapping[str, Any]]) -> dict[str, list[float | None]]:
    """The step's parts the run reported (ms), and ``compute``: the step less them (never below 0)."""
    parts = {name.removesuffix("_ms").removesuffix("_wait"): column(points, name) for name in STEP_PARTS}
    parts = {name: values for name, values in parts.items() if any(v is not None for v in values)}
    compute = []
    for i, p in enumerate(points):
        step = p.get("step_time_ms")
        rest = sum(values[i] or 0.0 for values in parts.values())
        compute.append(None if step is None else max(step - rest, 0.0))
    return {"compute": compute, **parts} if any(v is not None for v in compute) else parts


def badput_columns(points: Sequence[Mapping[str, Any]]) -> dict[str, list[float | None]]:
    """Each cause's badput so far (seconds) at each point, the largest cause first."""
    causes: dict[str, float] = {}
    for p in points:
        for cause, s in p.get("badput_s", {}).items():
            causes[cause] = max(causes.get(cause, 0.0), s)
    ordered = sorted((c for c, s in causes.items() if s > 0), key=lambda c: -causes[c])
    return {c: [p["badput_s"].get(c, 0.0) if "badput_s" in p else None for p in points] for c in ordered}


def subject_label(subject: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in subject.items()) or "job"


def signal_bars(transitions: Sequence[Mapping[str, Any]], start: float, end: float) -> list[SignalBar]:
    """Each raise paired with its signal's next clear for the same subject, in order of raising."""
    open_: dict[tuple[str, str], dict[str, Any]] = {}
    bars: list[SignalBar] = []
    for t in transitions:
        key = (t["signal"], subject_label(t.get("subject", {})))
        if t["event"] == "raised":
            open_[key] = t
        elif key in open_:
            bars.append(_bar(open_.pop(key), key[1], start, t["ts"] - start))
    bars.extend(_bar(t, key[1], start, None) for key, t in open_.items())
    return sorted(bars, key=lambda b: (b.start, b.signal))


def _bar(raised: Mapping[str, Any], subject: str, start: float, end: float | None) -> SignalBar:
    fields = dict(raised.get("subject", {}))
    message = raised.get("message", "")
    return SignalBar(raised["signal"], raised["severity"], subject, raised["ts"] - start, end, message, fields)


def heat_map(points: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[list[float | None]]]:
    """The ranks (sorted) and, per rank, its lateness (ms) at each point."""
    ranks = sorted({int(r) for p in points for r in p.get("ranks", {})})
    rows = [[p.get("ranks", {}).get(r) for p in points] for r in ranks]
    return ranks, rows


def faults(
    bars: Sequence[SignalBar], points: Sequence[Mapping[str, Any]], start: float, rank_gpus: Mapping[Any, Any]
) -> list[Fault]:
    """The first faults' GPUs (those their subject names; every GPU's mean for a job-level fault) around them."""
    out = []
    last = points[-1]["ts"] - start if points else 0.0
    for bar in bars[:MAX_FAULT_PANELS]:
        lo = max(bar.start - FAULT_MARGIN_S, 0.0)
        hi = min((bar.end if bar.end is not None else last) + FAULT_MARGIN_S, max(last, bar.start))
        near = [p for p in points if lo <= p["ts"] - start <= hi and "gpus" in p]
        keys = subject_gpus(bar.fields, near[0]["gpus"] if near else {}, rank_gpus)
        gpus = {label: [(p["ts"] - start, *_gpu(p["gpus"], ks)) for p in near] for label, ks in keys.items()}
        out.append(Fault(bar, gpus, (lo, hi)))
    return out


def subject_gpus(
    fields: Mapping[str, Any], gpus: Mapping[str, Any], rank_gpus: Mapping[Any, Any]
) -> dict[str, list[str]]:
    """The GPU keys (``node:index``) a subject names, by label; a subject naming none: every GPU, as one mean."""
    host, index = fields.get("hostname") or fields.get("node"), fields.get("gpu_index")
    if index is None and fields.get("rank") is not None:
        where = rank_gpus.get(fields["rank"]) or (None, None)
        host = host or where[0]
        index = where[1]
    if index is not None:
        for key in (f"{host}:{index}", f":{index}"):
            if key in gpus:
                return {f"GPU {index}" + (f" on {host}" if host else ""): [key]}
    return {"all GPUs (mean)": list(gpus)} if gpus else {}


def _gpu(gpus: Mapping[str, Any], keys: Sequence[str]) -> tuple[float | None, float | None, float | None]:
    """The mean of each of temperature, clock and power over ``keys`` (None where none has it)."""
    means: list[float | None] = []
    for i in range(3):
        values = [gpus[k][i] for k in keys if k in gpus and gpus[k][i] is not None]
        means.append(sum(values) / len(values) if values else None)
    return means[0], means[1], means[2]
