"""The host panel: CPU and load, memory and swap, disk and network rates."""

from __future__ import annotations

from typing import Any, Mapping

from rich.text import Text

from .. import fmt
from ..glyphs import bar
from ..view import View
from .base import DIM, LABEL_STYLE, Variants, graded, one_line, titled

CPU_GRADES = ((90.0, "bold red"), (70.0, "yellow"))
MEMORY_GRADES = ((90.0, "bold red"), (80.0, "yellow"))


def host_panel(view: View, width: int) -> Variants:
    """Three lines · one line · hidden."""
    h = view.host
    if not h:
        return [one_line("Host", "no host data"), None]
    bar_w = max(4, min(30, width - 46))
    cpu, mem = h.get("cpu_percent"), _memory_used_percent(h)
    full = titled(
        "Host",
        Text.assemble(("cpu  ", LABEL_STYLE), bar(_frac(cpu), bar_w, graded(cpu, CPU_GRADES, "green")),
                      f" {fmt.percent(cpu):>4} of {h.get('cpu_count', '?')}", ("  load ", DIM),
                      " ".join(fmt.num(h.get(k)) for k in ("load1", "load5", "load15")), no_wrap=True),
        Text.assemble(("mem  ", LABEL_STYLE), bar(_frac(mem), bar_w, graded(mem, MEMORY_GRADES, "cyan")),
                      f" {fmt.percent(mem):>4} {_memory_text(h)}", ("  swap ", DIM), _swap_text(h), no_wrap=True),
        Text.assemble(("disk ", LABEL_STYLE), f"r {fmt.rate(h.get('disk_read_bytes_per_sec'))} "
                      f"w {fmt.rate(h.get('disk_write_bytes_per_sec'))}", ("   net ", LABEL_STYLE),
                      f"rx {fmt.rate(h.get('net_rx_bytes_per_sec'))} tx {fmt.rate(h.get('net_tx_bytes_per_sec'))}",
                      no_wrap=True),
    )
    line = one_line(
        "Host",
        (f"cpu {fmt.percent(cpu)}", graded(cpu, CPU_GRADES, "")),
        f"load {fmt.num(h.get('load1'))}/{h.get('cpu_count', '?')}",
        (f"mem {fmt.percent(mem)} {_memory_text(h)}", graded(mem, MEMORY_GRADES, "")),
        f"swap {_swap_text(h)}",
        f"disk w {fmt.rate(h.get('disk_write_bytes_per_sec'))}",
        f"net rx {fmt.rate(h.get('net_rx_bytes_per_sec'))}",
    )
    return [full, line, None]


def _frac(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _memory_used_percent(h: Mapping[str, Any]) -> float | None:
    total, avail = h.get("memory_total_bytes"), h.get("memory_available_bytes")
    return 100.0 * (total - avail) / total if total and avail is not None else None


def _memory_text(h: Mapping[str, Any]) -> str:
    total, avail = h.get("memory_total_bytes"), h.get("memory_available_bytes")
    if not total or avail is None:
        return ""
    return f"{fmt.size(total - avail)}/{fmt.size(total)}"


def _swap_text(h: Mapping[str, Any]) -> str:
    total, used = h.get("swap_total_bytes"), h.get("swap_used_bytes")
    if used is None:
        return fmt.DASH
    return f"{fmt.size(used)}/{fmt.size(total)}" if total else fmt.size(used)
