"""The host panel: CPU and load, memory and swap, disk and network rates."""

from __future__ import annotations

from rich.text import Text

from ...samples import HostSample
from .. import fmt
from ..glyphs import bar
from ..view import View
from .base import DIM, LABEL_STYLE, Variants, graded, one_line, titled

CPU_GRADES = ((90.0, "bold red"), (70.0, "yellow"))
MEMORY_GRADES = ((90.0, "bold red"), (80.0, "yellow"))


def host_panel(view: View, width: int) -> Variants:
    """Three lines · one line · hidden."""
    h = view.host
    if h is None:
        return [one_line("Host", "no host data"), None]
    bar_w = max(4, min(30, width - 46))
    cpu, mem = h.cpu_percent, _memory_used_percent(h)
    full = titled(
        "Host",
        Text.assemble(
            ("cpu  ", LABEL_STYLE),
            bar(_frac(cpu), bar_w, graded(cpu, CPU_GRADES, "green")),
            f" {fmt.percent(cpu):>4} of {h.cpu_count or '?'}",
            ("  load ", DIM),
            " ".join(fmt.num(v) for v in (h.load1, h.load5, h.load15)),
            no_wrap=True,
        ),
        Text.assemble(
            ("mem  ", LABEL_STYLE),
            bar(_frac(mem), bar_w, graded(mem, MEMORY_GRADES, "cyan")),
            f" {fmt.percent(mem):>4} {_memory_text(h)}",
            ("  swap ", DIM),
            _swap_text(h),
            no_wrap=True,
        ),
        Text.assemble(
            ("disk ", LABEL_STYLE),
            f"r {fmt.rate(h.disk_read_bytes_per_sec)} w {fmt.rate(h.disk_write_bytes_per_sec)}",
            ("   net ", LABEL_STYLE),
            f"rx {fmt.rate(h.net_rx_bytes_per_sec)} tx {fmt.rate(h.net_tx_bytes_per_sec)}",
            no_wrap=True,
        ),
    )
    line = one_line(
        "Host",
        (f"cpu {fmt.percent(cpu)}", graded(cpu, CPU_GRADES, "")),
        f"load {fmt.num(h.load1)}/{h.cpu_count or '?'}",
        (f"mem {fmt.percent(mem)} {_memory_text(h)}", graded(mem, MEMORY_GRADES, "")),
        f"swap {_swap_text(h)}",
        f"disk w {fmt.rate(h.disk_write_bytes_per_sec)}",
        f"net rx {fmt.rate(h.net_rx_bytes_per_sec)}",
    )
    return [full, line, None]


def _frac(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _memory_used_percent(h: HostSample) -> float | None:
    total, avail = h.memory_total_bytes, h.memory_available_bytes
    return 100.0 * (total - avail) / total if total and avail is not None else None


def _memory_text(h: HostSample) -> str:
    total, avail = h.memory_total_bytes, h.memory_available_bytes
    if not total or avail is None:
        return ""
    return f"{fmt.size(total - avail)}/{fmt.size(total)}"


def _swap_text(h: HostSample) -> str:
    total, used = h.swap_total_bytes, h.swap_used_bytes
    if used is None:
        return fmt.DASH
    return f"{fmt.size(used)}/{fmt.size(total)}" if total else fmt.size(used)
