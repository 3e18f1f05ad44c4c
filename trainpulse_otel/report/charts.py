"""The report's charts: each a function of the model's data, drawn by matplotlib as inline SVG text.

Needs the ``report`` extra (``pip install -e '.[report]'`` in a clone): :func:`require` raises
:class:`MissingExtra` naming it when matplotlib is absent. The SVG has no script, its text stays text, and the
same data draws the same bytes (no date, a fixed hash salt). A heat map is an embedded image, not a path a cell.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .model import Fault, Losses, SignalBar, Throughput

#: TrainPulse installs from a clone (it is not on PyPI): ``scripts/run`` made ``.venv`` there, with the core only.
EXTRA_HINT = "pip install -e '.[report]' in TrainPulse's clone (.venv/bin/pip in the .venv scripts/run made)"
SEVERITY_COLOURS = {"critical": "#d62728", "warning": "#ff9f1c"}
WIDTH_IN = 10.0
#: A line of at most this many points is drawn with a marker on each (one tick is a dot, not nothing).
MARKERS_UP_TO = 60
#: A panel's values spanning more than this ratio are drawn on a log scale.
LOG_SPAN = 100.0
#: The most runs of non-finite values labelled on the loss chart (each is marked).
MAX_NONFINITE_LABELS = 12
NONFINITE_COLOUR = "#d62728"
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


def _draw(
    draw: Any, *args: Any, rows: int = 1, height: float = 2.4, xlabel: str = "seconds since the run's first tick"
) -> str:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig, axes = _figure(rows, height)
        draw(axes, *args)
        axes[-1].set_xlabel(xlabel)
        return _svg(fig)


def _line(ax: Any, x: Sequence[float], y: Sequence[float], **kw: Any) -> None:
    """A line, with a marker on each point when there are few (a single point is then still seen)."""
    if len(x) <= MARKERS_UP_TO:
        kw.setdefault("marker", "o")
        kw.setdefault("ms", 3)
    ax.plot(x, y, **kw)


def health_chart(times: Sequence[float], health: Sequence[float | None]) -> str:
    def draw(axes: Any) -> None:
        ax = axes[0]
        _line(ax, times, _nan(health), color="#2ca02c", lw=1.4)
        ax.fill_between(times, _nan(health), color="#2ca02c", alpha=0.15)
        ax.set_ylim(0, 105)
        ax.set_ylabel("health (0-100)")

    return _draw(draw)


def throughput_chart(times: Sequence[float], throughput: Throughput | None, mfu: Sequence[float | None]) -> str:
    """The run's throughput (whichever it reported, named on the panel) and MFU, each in its own panel when the
    run reported it."""
    shown = []
    if throughput is not None:
        shown.append((throughput.values, plain(throughput.label), "#1f77b4", 1.0))
    if any(v is not None for v in mfu):
        shown.append((mfu, "MFU (%)", "#9467bd", 100.0))

    def draw(axes: Any) -> None:
        for ax, (values, label, colour, scale) in zip(axes, shown, strict=True):
            _line(ax, times, [v * scale for v in _nan(values)], color=colour, lw=1.2)
            ax.set_ylabel(label.split(" (")[0])
            ax.set_title(f"throughput: {label}" if colour == "#1f77b4" else label, loc="left", fontsize=9)

    return _draw(draw, rows=len(shown), height=2.0)


def step_chart(
    times: Sequence[float], parts: Mapping[str, Sequence[float | None]], step: Sequence[float | None]
) -> str:
    def draw(axes: Any) -> None:
        ax = axes[0]
        if parts:
            ax.stackplot(times, *[[0.0 if math.isnan(v) else v for v in _nan(p)] for p in parts.values()])
        _line(ax, times, _nan(step), color="black", lw=1.0, label="step time")
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
        _line(good, times, [v * 100 for v in _nan(ratio)], color="#2ca02c", lw=1.2)
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


def timeline_chart(bars: Sequence[SignalBar], end_s: float, restarts_s: Sequence[float] = ()) -> str:
    """Each signal as a bar from raised to cleared, and a diamond where it was raised: a signal raised for a
    single tick (or raised and cleared at once) has a bar of at least a 150th of the axis and its diamond; a
    dashed line where each attempt after the first began (``restarts_s``)."""
    import matplotlib

    rows = list(dict.fromkeys(plain(f"{b.signal} · {b.subject}") for b in bars))
    span = max(end_s, 1.0)
    with matplotlib.rc_context(STYLE):
        fig, axes = _figure(height=0.6 + 0.28 * max(len(rows), 1))
        ax = axes[0]
        for b in bars:
            end = b.end if b.end is not None else end_s
            y = rows.index(plain(f"{b.signal} · {b.subject}"))
            colour = SEVERITY_COLOURS.get(b.severity, "#7f7f7f")
            ax.broken_barh([(b.start, max(end - b.start, span / 150))], (y - 0.35, 0.7), color=colour)
            ax.plot([b.start], [y], marker="D", ms=5, color=colour, mec="black", mew=0.5, clip_on=False)
        for i, at in enumerate(restarts_s, start=2):
            ax.axvline(at, color="#555555", linestyle="--", linewidth=1.0)
            ax.annotate(f"attempt {i}", (at, 0), xytext=(3, 0), textcoords="offset points", fontsize=8, va="bottom")
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
        ax.invert_yaxis()
        ax.set_xlim(-span / 100, span * 1.01)
        dashed = ", dashed: a restart's new attempt" if restarts_s else ""
        ax.set_xlabel(f"seconds since the run's first tick (orange: warning, red: critical{dashed})")
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
            extent=(times[0], times[-1] if times[-1] > times[0] else times[0] + 1.0, len(ranks) - 0.5, -0.5),
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


def loss_chart(losses: Losses) -> str:
    """The loss over steps, and the grad norm in a panel of its own (each only when reported): a panel whose
    values span more than :data:`LOG_SPAN` is on a log scale; a NaN or infinite value cannot be drawn as a
    value, so it is a red triangle at the top of its panel where it happened, labelled; each loss_spike and
    nonfinite_loss raise is a dashed line across both panels."""
    shown = [
        (values, name, colour)
        for values, name, colour in ((losses.loss, "loss", "#1f77b4"), (losses.grad_norm, "grad norm", "#ff7f0e"))
        if any(v is not None for v in values)
    ]

    def draw(axes: Any) -> None:
        for ax, (values, name, colour) in zip(axes, shown, strict=True):
            finite = [v if v is not None and math.isfinite(v) else math.nan for v in values]
            kept = [(x, v) for x, v in zip(losses.x, finite, strict=True) if not math.isnan(v)]
            _line(ax, [x for x, _ in kept], [v for _, v in kept], color=colour, lw=1.2, label=name if kept else None)
            _scale(ax, [v for _, v in kept])
            if not kept:
                ax.text(0.5, 0.5, f"every {name} was NaN or inf", transform=ax.transAxes, ha="center", color="#777")
                ax.set_yticks([])
            _nonfinite(ax, losses.x, values, name)
            ax.set_ylabel(name + (" (log)" if ax.get_yscale() != "linear" else ""))
        seen: set[tuple[str, str]] = set()
        for x, signal, severity in losses.marks:
            for i, ax in enumerate(axes):
                label = f"{plain(signal)} raised ({severity})" if i == 0 and (signal, severity) not in seen else None
                ax.axvline(x, color=SEVERITY_COLOURS.get(severity, "#7f7f7f"), ls="--", lw=1.1, label=label)
            seen.add((signal, severity))
        for ax in axes:
            if ax.get_legend_handles_labels()[1]:
                ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=4, fontsize=8, frameon=False)

    return _draw(draw, rows=len(shown), height=2.2, xlabel=losses.x_label)


def _scale(ax: Any, values: Sequence[float]) -> None:
    """Log scale when the values span more than :data:`LOG_SPAN` (symlog when some are 0 or below)."""
    positive = [v for v in values if v > 0]
    if not positive or max(positive) / min(positive) <= LOG_SPAN:
        return
    if len(positive) == len(values):
        ax.set_yscale("log")
    else:
        ax.set_yscale("symlog", linthresh=min(positive))


def _nonfinite(ax: Any, xs: Sequence[float], values: Sequence[float | None], name: str) -> None:
    """Each run of NaN or infinite values as triangles on a band at the top of the panel, its first labelled."""
    bad = [(i, x, v) for i, (x, v) in enumerate(zip(xs, values, strict=True)) if v is not None and not math.isfinite(v)]
    if not bad:
        return
    top = ax.get_xaxis_transform()  # x in data, y in the axes' height
    ax.plot(
        [x for _, x, _ in bad],
        [0.95] * len(bad),
        transform=top,
        ls="none",
        marker="v",
        ms=6,
        color=NONFINITE_COLOUR,
        clip_on=False,
        label=f"{name} NaN/inf ({len(bad)}), drawn at the top",
    )
    runs: list[list[tuple[int, float, float]]] = []
    for point in bad:  # a run: consecutive points of one kind (NaN, inf or -inf)
        if runs and point[0] == runs[-1][-1][0] + 1 and _kind(point[2]) == _kind(runs[-1][-1][2]):
            runs[-1].append(point)
        else:
            runs.append([point])
    for run in runs:
        if len(run) > 1:
            ax.plot([run[0][1], run[-1][1]], [0.95, 0.95], transform=top, color=NONFINITE_COLOUR, lw=2, clip_on=False)
    for run in runs[:MAX_NONFINITE_LABELS]:
        _, x, v = run[0]
        ax.annotate(
            f"{_kind(v)} at {x:g}" + (f" (+{len(run) - 1})" if len(run) > 1 else ""),
            (x, 0.95),
            xycoords=top,
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=7,
            color=NONFINITE_COLOUR,
        )


def _kind(value: float) -> str:
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
