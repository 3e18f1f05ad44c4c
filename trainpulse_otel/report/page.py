"""The report's page: one self-contained HTML document of a :class:`~.model.Report`, rendered from a template.

No script, no stylesheet, font or image from anywhere (a Content-Security-Policy says so to the browser): the
charts are inline SVG (:mod:`.charts`), the style is in the page. ``templates/page.html`` lays the page out; this
module hands it each section's data. The template environment escapes every value on its way out, so nothing a
job printed (log lines, messages, subjects, evidence) can become markup; only the charts' SVG and the page's own
constants are passed as markup. :data:`SECTIONS` are the page's ``<h2>`` headings, in order; a run read from logs
has :data:`LOG_SECTION` too, after the summary.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from functools import cache
from html import escape
from typing import Any

from jinja2 import Environment, PackageLoader, Template
from markupsafe import Markup

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
    texts = {"log_section": LOG_SECTION, "no_loss": NO_LOSS, "no_throughput": NO_THROUGHPUT, "no_gpus": NO_GPUS}
    return _template().render(page=_page(report), texts=texts, csp=_trusted(CSP), style=_trusted(STYLE))


@cache
def _template() -> Template:
    environment = Environment(
        loader=PackageLoader("trainpulse_otel.report", "templates"),
        autoescape=True,
        finalize=_escaped,
        keep_trailing_newline=True,
    )
    return environment.get_template("page.html")


def _escaped(value: Any) -> Any:
    """Every value as HTML-escaped text (the standard library's escaping, quotes included), markup as it is."""
    return value if isinstance(value, Markup) else _trusted(escape(str(value)))


def _trusted(html: str) -> Markup:
    """Markup the page may hold as it is: only the charts' SVG (matplotlib's: its text escaped by it), the page's
    own constants and text already escaped here — never a string from the run."""
    return Markup(html)  # noqa: S704 - the one place markup is made; see the docstring


def _page(r: Report) -> dict[str, Any]:
    has = {name: any(v is not None for v in values) for name, values in r.series.items()}

    def chart(ready: bool, draw: Callable[[], str]) -> Markup | None:
        return _trusted(draw()) if ready and r.times else None

    sections: list[tuple[str, str, Any]] = []
    if r.log_account is not None:
        account = r.log_account
        sections.append(
            (LOG_SECTION, "log", {"summary": account.get("summary", ""), "notes": account.get("notes", ())})
        )
    data = {
        "health": chart(has["health"], lambda: charts.health_chart(r.times, r.series["health"])),
        "losses": _losses(r),
        "throughput": {
            "svg": chart(
                r.throughput is not None or has["mfu"],
                lambda: charts.throughput_chart(r.times, r.throughput, r.series["mfu"]),
            ),
            "label": None if r.throughput is None else r.throughput.label,
        },
        "step": chart(has["step_time_ms"], lambda: charts.step_chart(r.times, r.step_parts, r.series["step_time_ms"])),
        "goodput": _goodput(r, (r.goodput or {}).get("badput_s", {})),
        "signals": {
            "svg": chart(
                bool(r.bars or r.restarts_s), lambda: charts.timeline_chart(r.bars, r.duration_s, r.restarts_s)
            ),
            "bars": _bars(r),
            "risks": _risks(r),
        },
        "heat": chart(bool(r.heat_ranks), lambda: charts.heat_chart(r.times, r.heat_ranks, r.heat)),
        "faults": _faults(r),
        "causes": _causes(r),
    }
    kinds = ("health", "losses", "throughput", "step", "goodput", "signals", "heat", "faults", "causes")
    sections += [(heading, kind, data[kind]) for heading, kind in zip(SECTIONS[1:], kinds, strict=True)]
    return {"title": r.title, "rows": _summary(r), "sections": sections}


def _summary(r: Report) -> list[tuple[str, str]]:
    g = r.goodput
    return [
        ("Run", f"{_utc(r.start_ts)} for {r.duration_s:.0f} s ({r.ticks} ticks)"),
        ("Health at the end", f"{r.health.get('score', 0):.0f} ({r.health.get('status', '')})"),
        ("Goodput", f"{g['ratio']:.1%}" if g else "not known"),
        ("Top cause", r.top_cause or "none"),
        ("Signals", ", ".join(r.signals) if r.signals else "none"),
    ]


def _goodput(r: Report, badput: Mapping[str, float]) -> dict[str, Any]:
    if r.goodput is None:
        reported = r.losses is not None or any(
            any(v is not None for v in r.series[name]) for name in r.series if name not in ("health", "goodput")
        )
        return {"unknown": _trusted(GOODPUT_UNKNOWN) if reported else "Goodput was not known (no training report)."}
    g = r.goodput
    totals = charts.badput_totals_chart(badput) if any(s > 0 for s in badput.values()) else ""
    return {
        "unknown": None,
        "ratio": f"{g['ratio']:.1%}",
        "wall": f"{g.get('wall_s') or r.duration_s:.0f}",
        "ideal": f"{g['ideal_step_time_ms']:.0f}",
        "over_time": _trusted(charts.badput_chart(r.times, r.badput_over_time, r.series["goodput"]) if r.times else ""),
        "totals": _trusted(totals),
        "life": _life(r),
    }


def _life(r: Report) -> dict[str, Any] | None:
    """The job's life for the goodput section: its attempts, what its restarts cost, its checkpoints and the
    interval to save at with what it rests on (None before the job has stepped)."""
    job = r.job
    if not job:
        return None
    attempts = [
        {
            "n": i,
            "start": f"{a['start'] - r.start_ts:.0f}",
            "end": "running" if a.get("end") is None else f"{a['end'] - r.start_ts:.0f}",
            "steps": f"{a.get('first_step')}–{a.get('last_step')}",
            "reason": a.get("end_reason") or "",
        }
        for i, a in enumerate(job.get("attempts") or (), start=1)
    ]
    lost = job.get("lost_s") or {}
    checkpoint = job.get("checkpoint") or {}
    inputs = job.get("interval_inputs") or {}
    return {
        "attempts": attempts,
        "ettr": "not known" if job.get("ettr") is None else f"{job['ettr']:.1%}",
        "interruptions": job.get("interruptions", 0),
        "mtbf": "none yet" if job.get("mtbf_s") is None else f"{job['mtbf_s']:.0f} s",
        "lost": ", ".join(f"{k.replace('_', ' ')} {v:.1f} s" for k, v in lost.items()),
        "checkpoint": ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in checkpoint.items() if v is not None),
        "recommended": job.get("recommended_checkpoint_interval_s"),
        "inputs": ", ".join(f"{k} {v}" for k, v in inputs.items() if k != "note" and v is not None),
        "note": inputs.get("note"),
    }


def _risks(r: Report) -> list[dict[str, str]]:
    """The node risks at the run's end: component, host, risk and its evidence in words."""
    return [
        {
            "component": x["component"],
            "host": x.get("hostname") or "this node",
            "risk": f"{x['risk']:.2f}",
            "evidence": "; ".join(x.get("evidence") or ()),
        }
        for x in r.node_risk
    ]


def _bars(r: Report) -> list[dict[str, str]]:
    return [
        {
            "start": f"{b.start:.0f}",
            "end": "active" if b.end is None else f"{b.end:.0f}",
            "severity": b.severity,
            "signal": b.signal,
            "subject": b.subject,
            "message": b.message,
        }
        for b in r.bars
    ]


def _losses(r: Report) -> dict[str, Any] | None:
    losses = r.losses
    if losses is None:
        return None

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
    return {"x_label": losses.x_label, "drawn": drawn, "bad": bad, "svg": _trusted(charts.loss_chart(losses))}


def _faults(r: Report) -> dict[str, Any]:
    items = [
        {
            "signal": fault.bar.signal,
            "subject": fault.bar.subject,
            "start": f"{fault.bar.start:.0f}",
            "svg": _trusted(charts.fault_chart(fault)) if fault.gpus else None,
        }
        for fault in (r.faults if r.has_gpus else ())
    ]
    return {"no_gpus": bool(r.faults) and not r.has_gpus, "shown": items}


def _causes(r: Report) -> list[dict[str, Any]]:
    out = []
    for c in r.causes:
        evidence = [
            {"signal": s["name"], "message": s["message"], "evidence": s["evidence"]} for s in c["signal_evidence"]
        ]
        if c.get("evidence"):
            evidence.append({"cause": c["evidence"]})
        out.append(
            {
                "cause": c["cause"],
                "confidence": f"{c['confidence']:.0%}",
                "subject": " ".join(_subject(c["subject"])),
                "summary": c["summary"],
                "seen": f"{c['first_ts'] - r.start_ts:.0f}–{c['last_ts'] - r.start_ts:.0f}",
                "top_ticks": c["top_ticks"],
                "signals": ", ".join(c["signals"]),
                "evidence": [_json(e) for e in evidence],
                "remediation": c.get("remediation") or "none given",
            }
        )
    return out


def _subject(subject: Mapping[str, Any]) -> list[str]:
    return [f"{k}={v}" for k, v in subject.items()] or ["job"]


def _json(value: Any) -> str:
    text = json.dumps(value, indent=1, default=str, allow_nan=True)
    return text if len(text) <= MAX_EVIDENCE_CHARS else text[:MAX_EVIDENCE_CHARS] + "\n…"


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
