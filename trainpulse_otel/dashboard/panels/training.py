"""The training panel: tokens/s and MFU sparklines over the ring, and where a step's time goes."""

from __future__ import annotations

from typing import Any, Mapping

from rich.text import Text

from .. import fmt
from ..glyphs import sparkline, stacked_bar
from ..view import View
from .base import DIM, LABEL_STYLE, Variants, one_line, titled

Training = Mapping[str, Any]

#: The step-time breakdown, in drawing order: (label, training field, colour).
#: ``compute`` is what is left of the step once the named waits are taken out.
BREAKDOWN: tuple[tuple[str, str | None, str], ...] = (
    ("compute", None, "green"),
    ("data", "data_wait_ms", "magenta"),
    ("tokenizer", "tokenizer_wait_ms", "bright_magenta"),
    ("sync", "sync_wait_ms", "yellow"),
    ("all-reduce", "all_reduce_wait_ms", "blue"),
    ("checkpoint", "checkpoint_ms", "red"),
)
LABEL_W = 10
VALUE_W = 7


def training_panel(view: View, width: int) -> Variants:
    """Full (context line, sparklines, breakdown and legend) · without context and legend · one line."""
    reported_at, t = (view.snapshot or {}).get("timestamp"), view.training
    if not t:
        reported_at, t = view.history.last_training()
    if not t:
        return [one_line("Training", "no training data yet — POST /v1/training, "
                                     "or use trainpulse_otel.TrainingMonitor in the job")]
    stale = _staleness(view, reported_at)
    spark_w = max(8, width - LABEL_W - VALUE_W - 2 - 16)
    tokens = _spark_row(view, "tokens/s", "tokens_per_sec", fmt.num(t.get("tokens_per_sec")), spark_w, "cyan",
                        fmt.num)
    mfu = _spark_row(view, "MFU", "mfu", fmt.percent(t.get("mfu"), is_fraction=True), spark_w, "green",
                     lambda v: fmt.percent(v, is_fraction=True))
    parts = breakdown(t)
    step = Text.assemble((f"{'step':<{LABEL_W}}", LABEL_STYLE), f"{fmt.millis(t.get('step_time_ms')):>{VALUE_W}} ",
                         stacked_bar([(ms, style) for _, ms, style in parts], max(8, width - LABEL_W - VALUE_W - 1)),
                         no_wrap=True)
    full = titled("Training", _context(t), tokens, mfu, step, *_legend(parts, width), note=stale)
    short = titled("Training", tokens, mfu, step, note=stale)
    line = one_line(
        "Training",
        f"step {t.get('global_step', '-'):,}" if t.get("global_step") is not None else "step -",
        Text.assemble(f"{fmt.num(t.get('tokens_per_sec'))} tok/s ",
                      sparkline(view.history.training_series("tokens_per_sec"), 12, "cyan")),
        f"MFU {fmt.percent(t.get('mfu'), is_fraction=True)}",
        f"{fmt.millis(t.get('step_time_ms'))}/step",
        _worst_wait(parts),
    )
    return [full, short, line]


def breakdown(t: Training) -> list[tuple[str, float, str]]:
    """(label, ms, colour) for each part of the step; compute is the remainder, never negative."""
    waits = [(label, float(t.get(field) or 0.0), style) for label, field, style in BREAKDOWN if field]
    step = float(t.get("step_time_ms") or 0.0)
    compute = max(0.0, step - sum(ms for _, ms, _ in waits))
    return [(BREAKDOWN[0][0], compute, BREAKDOWN[0][2]), *waits]


def _context(t: Training) -> Text:
    words = []
    if t.get("global_step") is not None:
        words.append(f"step {t['global_step']:,}")
    for key, label, show in (("loss", "loss", lambda v: f"{v:.4g}"), ("grad_norm", "grad", lambda v: f"{v:.3g}"),
                             ("learning_rate", "lr", lambda v: f"{v:.2e}"), ("global_batch_size", "gbs", str),
                             ("tflops", "TFLOP/s", fmt.num)):
        if t.get(key) is not None:
            words.append(f"{label} {show(t[key])}")
    if t.get("avg_seq_len") is not None:
        words.append(f"seq {t['avg_seq_len']:.0f}/{t.get('max_seq_len', 0):.0f}")
    return Text(" · ".join(words), style=DIM, no_wrap=True, overflow="ellipsis")


def _spark_row(view: View, label: str, field: str, now: str, width: int, style: str, show: Any) -> Text:
    series = view.history.training_series(field)
    known = [v for v in series[-width:] if v is not None]
    span = f" {show(min(known))}–{show(max(known))}" if known else ""
    return Text.assemble((f"{label:<{LABEL_W}}", LABEL_STYLE), (f"{now:>{VALUE_W}} ", "bold"),
                         sparkline(series, width, style), (span, DIM), no_wrap=True, overflow="ellipsis")


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


def _staleness(view: View, reported_at: Any) -> str:
    if reported_at is None or view.training:
        return ""
    return f"no report for {fmt.duration(view.now - float(reported_at))}; last one shown"
