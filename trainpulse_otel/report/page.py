"""The report's page: one self-contained HTML document of a :class:`~.model.Report`.

No script, no stylesheet, font or image from anywhere (a Content-Security-Policy says so to the browser): the
charts are inline SVG (:mod:`.charts`), the style is in the page. Every string from the run (log lines, messages,
subjects, evidence) is HTML-escaped, so nothing a job printed can become markup. :data:`SECTIONS` are the page's
``<h2>`` headings, in order; a run read from logs has :data:`LOG_SECTION` too, after the summary.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from html import escape
from typing import Any

from . import charts
from .model import Report, build_report
from .series import RunSeries

SECTIONS = (
    "Summary",
    "Health over time",
    "Loss and gradient norm over steps",
    "Throughput and MFU",
    "Step time and its parts",
    "Goodput and badput",
    "Signals on a timeline",
    "Ranks: lateness heat map",
    "GPUs around each fault",
    "Root causes",
)
#: The section a run read from logs has after the summary: what the lines became and what they could not show.
LOG_SECTION = "What the log said"
#: What the page says when the run reported no throughput at all (naming what it looked for).
NO_THROUGHPUT = (
    "No throughput was read from the run's reports: looked for tokens/s, samples/s, TFLOP/s per GPU, a step time "
    "(for steps/s) and MFU, and found none."
)
#: What the page says when the run's reports carried no loss and no grad norm.
NO_LOSS = "No loss or grad norm was read from the run's reports."
#: Why a run with training reports has no goodput.
GOODPUT_UNKNOWN = (
    "Goodput was not known: it is measured against the job's ideal step time, learnt from the reports' step times "
    "over a warm-up that this run's reports did not complete."
)
#: Said once, for the GPU section, when the run has no GPU reading at all.
NO_GPUS = "The run has no GPU readings (a log carries none): no GPU is shown around its signals."
#: The most characters of one evidence object the page shows.
MAX_EVIDENCE_CHARS = 4000
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1020px;padding:16px;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
.critical{color:#d62728;font-weight:bold}.warning{color:#b26b00;font-weight:bold}.none{color:#777}
pre{background:#f6f6f6;padding:6px;overflow-x:auto;font-size:.8em;max-height:24em}
.cause{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:10px 0}svg{max-width:100%;height:auto}
"""


def render_run(series: RunSeries, title: str) -> str:
    """The page of a run's series, titled ``title`` (needs the ``report`` extra): the command's and the API's."""
    return render_page(build_report(series.to_dict(), title))


def render_page(report: Report) -> str:
    """The whole page."""
    parts = [_summary(report)]
    if report.log_account is not None:
        parts.append(f"<section><h2>{LOG_SECTION}</h2>{_log_account(report.log_account)}</section>")
    for heading, body in zip(SECTIONS[1:], _bodies(report), strict=True):
        parts.append(f"<section><h2>{escape(heading)}</h2>{body}</section>")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        f"<title>TrainPulse report: {escape(report.title)}</title><style>{STYLE}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _bodies(r: Report) -> list[str]:
    def chart(ready: bool, draw: Callable[[], str], missing: str) -> str:
        return draw() if ready and r.times else f"<p class='none'>{escape(missing)}</p>"

    has = {name: any(v is not None for v in values) for name, values in r.series.items()}
    badput = (r.goodput or {}).get("badput_s", {})
    return [
        chart(has["health"], lambda: charts.health_chart(r.times, r.series["health"]), "No tick was diagnosed."),
        _losses(r),
        chart(
            r.throughput is not None or has["mfu"],
            lambda: _throughput_line(r) + charts.throughput_chart(r.times, r.throughput, r.series["mfu"]),
            NO_THROUGHPUT,
        ),
        chart(
            has["step_time_ms"],
            lambda: charts.step_chart(r.times, r.step_parts, r.series["step_time_ms"]),
            "The job reported no step time.",
        ),
        _goodput(r, badput),
        chart(bool(r.bars), lambda: charts.timeline_chart(r.bars, r.duration_s), "No signal was raised.")
        + _bar_table(r),
        chart(
            bool(r.heat_ranks),
            lambda: charts.heat_chart(r.times, r.heat_ranks, r.heat),
            "The job reported no per-rank data.",
        ),
        _faults(r),
        _causes(r),
    ]


def _summary(r: Report) -> str:
    status = escape(str(r.health.get("status", "")))
    g = r.goodput
    rows = [
        ("Run", f"{_utc(r.start_ts)} for {r.duration_s:.0f} s ({r.ticks} ticks)"),
        ("Health at the end", f"{r.health.get('score', 0):.0f} ({status})"),
        ("Goodput", f"{g['ratio']:.1%}" if g else "not known"),
        ("Top cause", escape(r.top_cause) if r.top_cause else "none"),
        ("Signals", escape(", ".join(r.signals)) if r.signals else "none"),
    ]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<h1>TrainPulse report: {escape(r.title)}</h1><section><h2>Summary</h2><table>{table}</table></section>"


def _goodput(r: Report, badput: Mapping[str, float]) -> str:
    if r.goodput is None:
        reported = r.losses is not None or any(
            any(v is not None for v in r.series[name]) for name in r.series if name not in ("health", "goodput")
        )
        return f"<p class='none'>{GOODPUT_UNKNOWN if reported else 'Goodput was not known (no training report).'}</p>"
    over_time = charts.badput_chart(r.times, r.badput_over_time, r.series["goodput"]) if r.times else ""
    totals = charts.badput_totals_chart(badput) if any(s > 0 for s in badput.values()) else ""
    g = r.goodput
    wall = g.get("wall_s") or r.duration_s
    line = f"<p>Goodput {g['ratio']:.1%} of {wall:.0f} s; ideal step {g['ideal_step_time_ms']:.0f} ms.</p>"
    return line + over_time + (totals or "<p class='none'>No time was lost.</p>")


def _bar_table(r: Report) -> str:
    rows = "".join(
        f"<tr><td>{b.start:.0f}</td><td>{'active' if b.end is None else f'{b.end:.0f}'}</td>"
        f"<td class='{escape(b.severity)}'>{escape(b.severity)}</td><td>{escape(b.signal)}</td>"
        f"<td>{escape(b.subject)}</td><td>{escape(b.message)}</td></tr>"
        for b in r.bars
    )
    head = "<tr><th>raised (s)</th><th>cleared (s)</th><th>severity</th><th>signal</th><th>subject</th><th>message</th>"
    return f"<table>{head}</tr>{rows}</table>" if r.bars else ""


def _log_account(account: Mapping[str, Any]) -> str:
    notes = "".join(f"<li>{escape(str(note))}</li>" for note in account.get("notes", ()))
    return f"<p>Read {escape(str(account.get('summary', '')))}.</p>" + (f"<ul>{notes}</ul>" if notes else "")


def _throughput_line(r: Report) -> str:
    if r.throughput is None:
        return "<p>No throughput was read (looked for tokens/s, samples/s, TFLOP/s per GPU, a step time): MFU only.</p>"
    return (
        f"<p>Throughput shown as <b>{escape(r.throughput.label)}</b>: the first of tokens/s, samples/s, "
        "TFLOP/s per GPU and steps/s (from the step time) that the run's reports carried.</p>"
    )


def _losses(r: Report) -> str:
    losses = r.losses
    if losses is None:
        return f"<p class='none'>{escape(NO_LOSS)}</p>"

    def nonfinite(values: list[float | None]) -> int:
        return sum(v is not None and not math.isfinite(v) for v in values)

    bad_loss, bad_grad = nonfinite(losses.loss), nonfinite(losses.grad_norm)
    drawn = f"{len(losses.x)} point(s) drawn" + (
        f" of {losses.reports} reported (each the worst of those it stands for)"
        if losses.reports > len(losses.x)
        else ""
    )
    bad = (
        f"; NaN or inf, marked at the top of its panel: {bad_loss} loss(es), {bad_grad} grad norm(s)"
        if bad_loss or bad_grad
        else ""
    )
    return f"<p>Over {escape(losses.x_label)}: {drawn}{bad}.</p>" + charts.loss_chart(losses)


def _faults(r: Report) -> str:
    if r.faults and not r.has_gpus:
        return f"<p class='none'>{escape(NO_GPUS)}</p>"
    out = []
    for fault in r.faults:
        b = fault.bar
        out.append(f"<h3>{escape(b.signal)} · {escape(b.subject)} (raised at {b.start:.0f} s)</h3>")
        out.append(charts.fault_chart(fault) if fault.gpus else "<p class='none'>No GPU reading around it.</p>")
    return "".join(out) or "<p class='none'>No fault.</p>"


def _causes(r: Report) -> str:
    out = []
    for c in r.causes:
        evidence = [
            {"signal": s["name"], "message": s["message"], "evidence": s["evidence"]} for s in c["signal_evidence"]
        ]
        if c.get("evidence"):
            evidence.append({"cause": c["evidence"]})
        out.append(
            "<div class='cause'>"
            f"<h3>{escape(c['cause'])} <small>({c['confidence']:.0%}; {escape(' '.join(_subject(c['subject'])))})</small></h3>"
            f"<p>{escape(c['summary'])}</p>"
            f"<p><b>Seen</b> {c['first_ts'] - r.start_ts:.0f}–{c['last_ts'] - r.start_ts:.0f} s, top cause for "
            f"{c['top_ticks']} tick(s); <b>signals</b>: {escape(', '.join(c['signals']))}</p>"
            + "".join(f"<pre>{escape(_json(e))}</pre>" for e in evidence)
            + f"<p><b>Remediation:</b> {escape(c.get('remediation') or 'none given')}</p></div>"
        )
    return "".join(out) or "<p class='none'>No root cause was found.</p>"


def _subject(subject: Mapping[str, Any]) -> list[str]:
    return [f"{k}={v}" for k, v in subject.items()] or ["job"]


def _json(value: Any) -> str:
    text = json.dumps(value, indent=1, default=str, allow_nan=True)
    return text if len(text) <= MAX_EVIDENCE_CHARS else text[:MAX_EVIDENCE_CHARS] + "\n…"


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
