"""The training panel: tokens/s and MFU sparklines over the ring, and where a step's time goes."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from ...samples import TrainingSample
from .. import fmt
from ..glyphs import sparkline, stacked_bar
from ..view import View
from .base import DIM, LABEL_STYLE, Variants, one_line, titled

Read = Callable[[TrainingSample], float | None]

#: The step-time breakdown after ``compute`` (what is left of the step once these waits are taken out),
#: in drawing order: (label, the wait's field, colour).
COMPUTE = ("compute", "green")
WAITS: tuple[tuple[str, Read, str], ...] = (
    ("data", lambda t: t.data_wait_ms, "magenta"),
    ("tokenizer", lambda t: t.tokenizer_wait_ms, "bright_magenta"),
    ("sync", lambda t: t.sync_wait_ms, "yellow"),
    ("all-reduce", lambda t: t.all_reduce_wait_ms, "blue"),
    ("checkpoint", lambda t: t.checkpoint_ms, "red"),
)
LABEL_W = 10
VALUE_W = 7


def training_panel(view: View, width: int) -> Variants:
    """Full (context line, sparklines, breakdown and legend) · without context and legend · one line."""
    reported_at, t = None, view.training
    if t is None:  # a checkpoint blocking the loop: the last report stays on screen, marked stale
        reported_at, t = view.history.last_training()
    if t is None:
        return [
            one_line(
                "Training",
                "no training data yet — POST /v1/training, or use trainpulse_otel.TrainingMonitor in the job",
            )
        ]
    stale = _staleness(view, reported_at)
    spark_w = max(8, width - LABEL_W - VALUE_W - 2 - 16)
    tokens = _spark_row(view, "tokens/s", _tokens, fmt.num(t.tokens_per_sec), spark_w, "cyan", fmt.num)
    mfu = _spark_row(
        view,
        "MFU",
        _mfu,
        fmt.percent(t.mfu, is_fraction=True),
        spark_w,
        "green",
        lambda v: fmt.percent(v, is_fraction=True),
    )
    parts = breakdown(t)
    step = Text.assemble(
        (f"{'step':<{LABEL_W}}", LABEL_STYLE),
        f"{fmt.millis(t.step_time_ms):>{VALUE_W}} ",
        stacked_bar([(ms, style) for _, ms, style in parts], max(8, width - LABEL_W - VALUE_W - 1)),
        no_wrap=True,
    )
    goodput = _goodput_row(view) + _job_row(view)
    full = titled("Training", _context(t), tokens, mfu, step, *_legend(parts, width), *goodput, note=stale)
    short = titled("Training", tokens, mfu, step, *goodput, note=stale)
    line = one_line(
        "Training",
        f"step {t.global_step:,}" if t.global_step is not None else "step -",
        Text.assemble(
            f"{fmt.num(t.tokens_per_sec)} tok/s ", sparkline(view.history.training_series(_tokens), 12, "cyan")
        ),
        f"MFU {fmt.percent(t.mfu, is_fraction=True)}",
        f"{fmt.millis(t.step_time_ms)}/step",
        _worst_wait(parts),
        *([f"goodput {view.diagnosis.goodput.window_ratio:.0%}"] if view.diagnosis.goodput else []),
    )
    return [full, short, line]


#: Causes of lost time named on the goodput row, most seconds first.
BADPUT_SHOWN = 2


def _goodput_row(view: View) -> list[Text]:
    """``goodput  78% · 10 min 75% · lost: straggler_rank 39 s, …`` (nothing until the ideal step is known)."""
    goodput = view.diagnosis.goodput
    if goodput is None:
        return []
    lost = sorted(((s, cause) for cause, s in goodput.badput_s.items() if s >= 0.5), reverse=True)[:BADPUT_SHOWN]
    row = Text.assemble(
        (f"{'goodput':<{LABEL_W}}", LABEL_STYLE),
        (f"{goodput.ratio:>{VALUE_W}.0%} ", "bold"),
        (f"10 min {goodput.window_ratio:.0%}", DIM),
        no_wrap=True,
        overflow="ellipsis",
    )
    if lost:
        row.append(" · lost: " + ", ".join(f"{cause} {fmt.duration(s)}" for s, cause in lost), style=DIM)
    return [row]


def _job_row(view: View) -> list[Text]:
    """``job  ETTR 73% · attempt 2 · restarts lost 33 s · saves every 22 s, Daly 19 s`` once the job has been
    restarted or an interval can be recommended (nothing for a job of one attempt with nothing to advise)."""
    goodput = view.diagnosis.goodput
    job = goodput.job if goodput is not None else None
    if not job:
        return []
    attempts, recommended = len(job.get("attempts") or ()), job.get("recommended_checkpoint_interval_s")
    if attempts < 2 and recommended is None:
        return []
    parts = [f"attempt {attempts}"]
    lost = sum((job.get("lost_s") or {}).values())
    if attempts > 1:
        parts.append(f"restarts lost {fmt.duration(lost)}")
    every = (job.get("checkpoint") or {}).get("interval_s")
    if recommended is not None:
        parts.append((f"saves every {fmt.duration(every)}, " if every else "") + f"Daly {fmt.duration(recommended)}")
    ettr = job.get("ettr")
    row = Text.assemble(
        (f"{'job':<{LABEL_W}}", LABEL_STYLE),
        (f"ETTR {ettr:.0%} " if ettr is not None else "", "bold"),
        no_wrap=True,
        overflow="ellipsis",
    )
    row.append(" · ".join(parts), style=DIM)
    return [row]


def _tokens(t: TrainingSample) -> float | None:
    return t.tokens_per_sec


def _mfu(t: TrainingSample) -> float | None:
    return t.mfu


def breakdown(t: TrainingSample) -> list[tuple[str, float, str]]:
    """(label, ms, colour) for each part of the step; compute is the remainder, never negative."""
    waits = [(label, read(t) or 0.0, style) for label, read, style in WAITS]
    compute = max(0.0, (t.step_time_ms or 0.0) - sum(ms for _, ms, _ in waits))
    return [(COMPUTE[0], compute, COMPUTE[1]), *waits]


def _context(t: TrainingSample) -> Text:
    words = []
    if t.global_step is not None:
        words.append(f"step {t.global_step:,}")
    for value, label, show in (
        (t.loss, "loss", lambda v: f"{v:.4g}"),
        (t.grad_norm, "grad", lambda v: f"{v:.3g}"),
        (t.learning_rate, "lr", lambda v: f"{v:.2e}"),
        (t.global_batch_size, "gbs", str),
        (t.tflops, "TFLOP/s", fmt.num),
    ):
        if value is not None:
            words.append(f"{label} {show(value)}")
    if t.avg_seq_len is not None:
        words.append(f"seq {t.avg_seq_len:.0f}/{t.max_seq_len or 0:.0f}")
    return Text(" · ".join(words), style=DIM, no_wrap=True, overflow="ellipsis")


def _spark_row(
    view: View, label: str, read: Read, now: str, width: int, style: str, show: Callable[[float], str]
) -> Text:
    series = view.history.training_series(read)
    known = [v for v in series[-width:] if v is not None]
    span = f" {show(min(known))}–{show(max(known))}" if known else ""
    return Text.assemble(
        (f"{label:<{LABEL_W}}", LABEL_STYLE),
        (f"{now:>{VALUE_W}} ", "bold"),
        sparkline(series, width, style),
        (span, DIM),
        no_wrap=True,
        overflow="ellipsis",
    )


def _legend(parts: list[tuple[str, float, str]], width: int) -> list[Text]:
    """``■ sync 540ms 23%`` items, packed into as few lines as the width allows, never split."""
    total = sum(ms for _, ms, _ in parts) or 1.0
    lines = [Text(" " * LABEL_W)]
    for label, ms, style in parts:
        share = f" {ms / total:.0%}" if ms / total >= 0.01 else ""
        item = Text.assemble(("■ ", style), f"{label} {fmt.millis(ms)}", (share, DIM), "  ")
        if lines[-1].cell_len + item.cell_len > width + 2 and lines[-1].cell_len > LABEL_W:
            lines.append(Text(" " * LABEL_W))
        lines[-1].append_text(item)
    return lines


def _worst_wait(parts: list[tuple[str, float, str]]) -> str:
    total = sum(ms for _, ms, _ in parts)
    label, ms, _ = max(parts[1:], key=lambda p: p[1])
    return f"{label} {ms / total:.0%}" if total and ms / total >= 0.05 else "compute-bound"


def _staleness(view: View, reported_at: float | None) -> str:
    if reported_at is None:  # the report is the snapshot's own
        return ""
    return f"no report for {fmt.duration(view.now - reported_at)}; last one shown"
