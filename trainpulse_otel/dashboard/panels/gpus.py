"""The GPU table: utilisation and memory bars, temperature, power/limit, SM clock/max, throttling.

Rows are built cell by cell at exact widths (not with rich's Table) so 1–16 GPUs
line up at any width and the panel's height is known before it is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean

from rich.text import Text

from ...samples import GpuSample
from .. import fmt
from ..glyphs import bar
from ..grades import CLOCK_GRADES, MEMORY_GRADES, TEMP_GRADES, UTIL_GRADES, memory_percent
from ..view import View
from .base import DIM, LABEL_STYLE, Variants, graded, one_line, titled

#: Short codes for NVML's throttle reasons, and how loudly to show them.
THROTTLE_CODES: dict[str, tuple[str, str]] = {
    "gpu_idle": ("idle", DIM),
    "sw_power_cap": ("pwr-cap", "yellow"),
    "hw_slowdown": ("hw-slow", "bold red"),
    "sw_thermal": ("thermal", "red"),
    "hw_thermal": ("hw-therm", "bold red"),
    "hw_power_brake": ("pwr-brake", "bold red"),
}
NAME_MIN_WIDTH = 110  # below this the GPU name column is dropped
FIXED_CELLS = {"idx": 3, "util": 4, "mem": 7, "temp": 4, "power": 8, "clock": 9}


def gpus_panel(view: View, width: int) -> Variants:
    """Full table · table without its heading row · two GPUs a line · one summary line.

    A job's snapshot shows the worst node's GPUs (:meth:`~..job.JobView.worst`), its hostname in the title."""
    job, gpus, on = view.job, view.gpus, ""
    if job is not None and view.snapshot is not None:
        on = job.worst().hostname
        gpus = view.snapshot.node_gpus(on)
        on = f" on {on}"
    if not gpus:
        mode = view.mode
        why = "host-only mode" if mode == "host" else f"mode {mode}" if mode else "waiting for data"
        return [one_line("GPUs" + on, f"none reported ({why})")]
    rows = _Rows(width, show_name=width >= NAME_MIN_WIDTH)
    table = [rows.row(g) for g in gpus]
    note = f"{len(gpus)} × {_short_name(gpus[0])}" if gpus[0].name else f"{len(gpus)}"
    title = "GPUs" + on
    return [
        titled(title, rows.heading(), *table, note=note),
        titled(title, *table, note=note),
        titled(title, *_pairs(gpus, width), note=note),
        _summary(gpus, title),
    ]


class _Rows:
    """Cell widths for one panel width: fixed cells, then the bars share what is left."""

    def __init__(self, width: int, show_name: bool) -> None:
        self.name_w = 18 if show_name else 0
        fixed = sum(FIXED_CELLS.values()) + len(FIXED_CELLS) + (self.name_w + 1 if show_name else 0)
        self.throttle_w = max(9, min(20, width // 8))
        spare = width - fixed - self.throttle_w - 2
        self.bar_w = max(3, min(30, spare // 2))

    def heading(self) -> Text:
        cells = [_cell("GPU", 3)]
        if self.name_w:
            cells.append(_cell("name", self.name_w))
        cells += [
            _cell("util", self.bar_w + 5),
            _cell("memory", self.bar_w + 8),
            _cell("temp", 4, right=True),
            _cell("power W", 8, right=True),
            _cell("SM MHz", 9, right=True),
            _cell("throttle", 8),
        ]
        return _join(cells, style=DIM)

    def row(self, g: GpuSample) -> Text:
        util, mem_pct = g.utilization_percent, memory_percent(g)
        cells = [_cell(str(g.index), 3, style=LABEL_STYLE)]
        if self.name_w:
            cells.append(_cell(_short_name(g), self.name_w, style=DIM))
        cells += [
            Text.assemble(
                bar(_fraction(util), self.bar_w, graded(util, UTIL_GRADES, "red")),
                " ",
                _cell(fmt.percent(util), 4, right=True),
            ),
            Text.assemble(
                bar(_fraction(mem_pct), self.bar_w, graded(mem_pct, MEMORY_GRADES, "cyan")),
                " ",
                _cell(_memory_text(g), 7, right=True),
            ),
            _cell(_temp(g), 4, right=True, style=graded(g.temperature_celsius, TEMP_GRADES)),
            _cell(_power(g), 8, right=True),
            _cell(_clock(g), 9, right=True, style=graded(_clock_ratio(g), CLOCK_GRADES, "red")),
            _throttle(g),
        ]
        return _join(cells)


def _pairs(gpus: Sequence[GpuSample], width: int) -> list[Text]:
    """Two GPUs a line, for tall GPU counts on short terminals."""
    half = (width - 2) // 2
    lines = []
    for i in range(0, len(gpus), 2):
        line = _mini(gpus[i], half)
        if i + 1 < len(gpus):
            line = Text.assemble(line, "  ", _mini(gpus[i + 1], half))
        lines.append(line)
    return lines


def _mini(g: GpuSample, width: int) -> Text:
    util, mem_pct = g.utilization_percent, memory_percent(g)
    code, code_style = (_codes(g) or [("", DIM)])[0]
    bar_w = max(3, width - 33)
    return Text.assemble(
        _cell(str(g.index), 2, style=LABEL_STYLE),
        " ",
        bar(_fraction(util), bar_w, graded(util, UTIL_GRADES, "red")),
        " ",
        _cell(fmt.percent(util), 4, right=True),
        _cell(f"m{fmt.percent(mem_pct)}", 5, right=True, style=graded(mem_pct, MEMORY_GRADES, "cyan")),
        " ",
        _cell(_temp(g), 4, right=True, style=graded(g.temperature_celsius, TEMP_GRADES)),
        " ",
        _cell(fmt.num(g.power_watts) + "W", 5, right=True),
        " ",
        _cell(code, 8, style=code_style),
    )


def _summary(gpus: Sequence[GpuSample], title: str) -> Text:
    reporting = [g for g in gpus if g.utilization_percent is not None]
    mems = [m for m in (memory_percent(g) for g in gpus) if m is not None]
    temps = [(g.temperature_celsius, g.index) for g in gpus if g.temperature_celsius is not None]
    throttled = [g for g in gpus if any(code != "idle" for code, _ in _codes(g))]
    parts: list[str | tuple[str, str]] = [f"{len(gpus)} × {_short_name(gpus[0])}"]
    if reporting:
        utils = [g.utilization_percent for g in reporting if g.utilization_percent is not None]
        low = min(reporting, key=lambda g: g.utilization_percent or 0.0)
        parts.append(f"util {fmt.percent(mean(utils))} (min {fmt.percent(low.utilization_percent)} gpu {low.index})")
    if mems:
        parts.append(f"mem max {fmt.percent(max(mems))}")
    if temps:
        hottest = max(temps)
        parts.append((f"hottest {hottest[0]:.0f}°C gpu {hottest[1]}", graded(hottest[0], TEMP_GRADES)))
    if throttled:
        named = ", ".join(f"{g.index} {_codes(g)[0][0]}" for g in throttled[:4])
        parts.append((f"throttled: {named}", "bold red"))
    return one_line(title, *parts)


# ------------------------------------------------------------------ cells


def _cell(text: str, width: int, style: str = "", right: bool = False) -> Text:
    text = text if len(text) <= width else text[: max(0, width - 1)] + "…"
    return Text(text.rjust(width) if right else text.ljust(width), style=style)


def _join(cells: list[Text], style: str = "") -> Text:
    line = Text(" ").join(cells)
    line.no_wrap, line.overflow = True, "ellipsis"
    if style:
        line.stylize(style)
    return line


def _fraction(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _memory_text(g: GpuSample) -> str:
    used, total = g.memory_used_bytes, g.memory_total_bytes
    if used is None or not total:
        return fmt.DASH
    return f"{used / 2**30:.0f}/{total / 2**30:.0f}G"


def _temp(g: GpuSample) -> str:
    t = g.temperature_celsius
    return fmt.DASH if t is None else f"{t:.0f}°C"


def _power(g: GpuSample) -> str:
    watts, limit = g.power_watts, g.power_limit_watts
    if watts is None:
        return fmt.DASH
    return f"{watts:.0f}/{limit:.0f}W" if limit else f"{watts:.0f}W"


def _clock(g: GpuSample) -> str:
    clock, top = g.sm_clock_mhz, g.max_sm_clock_mhz
    if clock is None:
        return fmt.DASH
    return f"{clock:.0f}/{top:.0f}" if top else f"{clock:.0f}MHz"


def _clock_ratio(g: GpuSample) -> float | None:
    clock, top = g.sm_clock_mhz, g.max_sm_clock_mhz
    return clock / top if clock is not None and top else None


def _codes(g: GpuSample) -> list[tuple[str, str]]:
    return [THROTTLE_CODES.get(r, (r, "red")) for r in g.throttle_reasons or ()]


def _throttle(g: GpuSample) -> Text:
    codes = _codes(g)
    if not codes:
        return Text("—" if g.throttle_reasons is not None else "", style=DIM)
    return Text(",").join(Text(code, style=style) for code, style in codes)


def _short_name(g: GpuSample) -> str:
    name = g.name or "GPU"
    return name.removeprefix("NVIDIA ").removeprefix("Tesla ")
