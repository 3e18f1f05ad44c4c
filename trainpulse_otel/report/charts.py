"""The report's charts: each a function of the model's data, drawn by matplotlib as inline SVG text.

Needs the ``report`` extra (``pip install 'trainpulse-otel[report]'``): :func:`require` raises
:class:`MissingExtra` naming it when matplotlib is absent. The SVG has no script, its text stays text, and the
same data draws the same bytes (no date, a fixed hash salt). A heat map is an embedded image, not a path a cell.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .model import Fault, SignalBar

EXTRA_HINT = "pip install 'trainpulse-otel[report]'"
SEVERITY_COLOURS = {"critical": "#d62728", "warning": "#ff9f1c"}
WIDTH_IN = 10.0
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "trainpulse",
    "font.size": 9,
    "font.family": "sans-serif",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


class MissingExtra(RuntimeError):
    """matplotlib (the ``report`` extra) is not installed."""


def require() -> None:
    """Raise :class:`MissingExtra` unless matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingExtra(f"the report needs matplotlib: {EXTRA_HINT}") from None


def plain(text: str) -> str:
    """A label from data, drawn as written (matplotlib reads ``$…$`` as math)."""
    return text.replace("$", r"\$")


def _nan(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def _figure(rows: int = 1, height: float = 2.4) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height * rows), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    return fig, axes


def _svg(fig: Any) -> str:
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg") :]


def _draw(draw: Any, *args: Any, rows: int = 1, height: float = 2.4) -> str:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig, axes = _figure(rows, height)
        draw(axes, *args)
        axes[-1].set_xlabel("seconds since the run's first tick")
        return _svg(fig)


def health_chart(times: Sequence[float], health: Sequence[float | None]) -> str:
    def draw(axes: Any) -> None:
        ax = axes[0]
        ax.plot(times, _nan(health), color="#2ca02c", lw=1.4)
        ax.fill_between(times, _nan(health), color="#2ca02c", alpha=0.15)
        ax.set_ylim(0, 105)
        ax.set_ylabel("health (0-100)")

    return _draw(draw)


def throughput_chart(times: Sequence[float], series: Mapping[str, Sequence[float | None]]) -> str:
    """Tokens/s and MFU, each in its own panel when the run reported it."""
    shown = [
        (name, label, colour, scale)
        for name, label, colour, scale in (
            ("tokens_per_sec", "tokens/s", "#1f77b4", 1.0),
            ("mfu", "MFU (%)", "#9467bd", 100.0),
        )
        if any(v is not None for v in series[name])
    ]

    def draw(axes: Any) -> None:
        for ax, (name, label, colour, scale) in zip(axes, shown, strict=True):
            ax.plot(times, [v * scale for v in _nan(series[name])], color=colour, lw=1.2)
            ax.set_ylabel(label)

    return _draw(draw, rows=len(shown), height=2.0)


def step_chart(
    times: Sequence[float], parts: Mapping[str, Sequence[float | None]], step: Sequence[float | None]
) -> str:
    def draw(axes: Any) -> None:
        ax = axes[0]
        if parts:
            ax.stackplot(times, *[[0.0 if math.isnan(v) else v for v in _nan(p)] for p in parts.values()])
        ax.plot(times, _nan(step), color="black", lw=1.0, label="step time")
        ax.legend([*parts, "step time"] if parts else ["step time"], loc="upper left", ncols=4, fontsize=8)
        ax.set_ylabel("ms a step")

    return _draw(draw, height=3.0)


def badput_chart(
    times: Sequence[float], badput: Mapping[str, Sequence[float | None]], ratio: Sequence[float | None]
) -> str:
    def draw(axes: Any) -> None:
        lost, good = axes
        if badput:
            lost.stackplot(times, *[[0.0 if math.isnan(v) else v for v in _nan(c)] for c in badput.values()])
            lost.legend(list(badput), loc="upper left", ncols=3, fontsize=8)
        lost.set_ylabel("badput so far (s)")
        good.plot(times, [v * 100 for v in _nan(ratio)], color="#2ca02c", lw=1.2)
        good.set_ylim(0, 105)
        good.set_ylabel("goodput (%)")

    return _draw(draw, rows=2, height=2.2)


def badput_totals_chart(badput_s: Mapping[str, float]) -> str:
    import matplotlib

    items = sorted(((c, s) for c, s in badput_s.items() if s > 0), key=lambda x: x[1])
    with matplotlib.rc_context(STYLE):
        fig, axes = _figure(height=0.4 + 0.3 * max(len(items), 1))
        ax = axes[0]
        ax.barh([c for c, _ in items], [s for _, s in items], color="#d62728")
        for i, (_, s) in enumerate(items):
            ax.annotate(f" {s:.0f} s", (s, i), va="center", fontsize=8)
        ax.set_xlabel("seconds lost, by cause")
        return _svg(fig)


def timeline_chart(bars: Sequence[SignalBar], end_s: float) -> str:
    import matplotlib

    rows = list(dict.fromkeys(plain(f"{b.signal} · {b.subject}") for b in bars))
    with matplotlib.rc_context(STYLE):
        fig, axes = _figure(height=0.6 + 0.28 * max(len(rows), 1))
        ax = axes[0]
        for b in bars:
            end = b.end if b.end is not None else end_s
            y = rows.index(plain(f"{b.signal} · {b.subject}"))
            ax.broken_barh(
                [(b.start, max(end - b.start, end_s / 500))],
                (y - 0.35, 0.7),
                color=SEVERITY_COLOURS.get(b.severity, "#7f7f7f"),
            )
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
        ax.invert_yaxis()
        ax.set_xlim(0, max(end_s, 1.0))
        ax.set_xlabel("seconds since the run's first tick (orange: warning, red: critical)")
        return _svg(fig)


def heat_chart(times: Sequence[float], ranks: Sequence[int], heat: Sequence[Sequence[float | None]]) -> str:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig, axes = _figure(height=1.2 + min(0.12 * len(ranks), 4.0))
        ax = axes[0]
        image = ax.imshow(
            [_nan(row) for row in heat],
            aspect="auto",
            interpolation="nearest",
            cmap="magma_r",
            extent=(times[0], times[-1], len(ranks) - 0.5, -0.5),
        )
        ax.grid(False)
        step = max(1, len(ranks) // 16)
        ax.set_yticks(range(0, len(ranks), step), [str(r) for r in ranks[::step]])
        ax.set_ylabel("rank")
        ax.set_xlabel("seconds since the run's first tick")
        fig.colorbar(image, ax=ax, label="late by (ms)")
        return _svg(fig)


def fault_chart(fault: Fault) -> str:
    def draw(axes: Any) -> None:
        lo, hi = fault.span
        end = fault.bar.end if fault.bar.end is not None else hi
        for ax, i, label in zip(axes, (1, 2, 3), ("temperature (°C)", "SM clock (MHz)", "power (W)"), strict=True):
            for name, rows in fault.gpus.items():
                ax.plot([r[0] for r in rows], _nan([r[i] for r in rows]), lw=1.2, label=plain(name))
            colour = SEVERITY_COLOURS.get(fault.bar.severity, "#7f7f7f")
            ax.axvspan(fault.bar.start, end, color=colour, alpha=0.12)
            ax.set_xlim(lo, max(hi, lo + 1.0))
            ax.set_ylabel(label)
        axes[0].legend(loc="upper left", fontsize=8)

    return _draw(draw, rows=3, height=1.5)
