"""A plain-text ``trainpulse top``: one screenful per tick from a snapshot.

The dashboard consumes snapshots only (local engine or a daemon's
``/v1/snapshot``), never collectors or detectors.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

from ..config import Settings

GiB = 1 << 30


def render_text(snapshot: Mapping[str, Any]) -> str:
    """The snapshot as a few lines of text: health, GPUs, host, training, signals, causes."""
    d = snapshot.get("diagnosis") or {}
    health = d.get("health") or {}
    lines = [f"TrainPulse  mode={snapshot.get('mode')}  health={health.get('score', '?')} ({health.get('status', '?')})"]
    for g in snapshot.get("gpus") or []:
        lines.append(
            f"GPU{g['index']:<3} util {_n(g.get('utilization_percent'), '%')}  "
            f"mem {_n(_div(g.get('memory_used_bytes'), GiB), 'G')}/{_n(_div(g.get('memory_total_bytes'), GiB), 'G')}  "
            f"{_n(g.get('temperature_celsius'), 'C')}  {_n(g.get('power_watts'), 'W')}  "
            f"{_n(g.get('sm_clock_mhz'), 'MHz')}  {','.join(g.get('throttle_reasons') or [])}"
        )
    host = snapshot.get("host")
    if host:
        lines.append(f"host cpu {_n(host.get('cpu_percent'), '%')}  load {_n(host.get('load1'), '')}  "
                     f"mem avail {_n(_div(host.get('memory_available_bytes'), GiB), 'G')}")
    t = snapshot.get("training")
    if t:
        lines.append(f"train step {t.get('global_step', '-')}  {_n(t.get('step_time_ms'), 'ms')}  "
                     f"{_n(t.get('tokens_per_sec'), ' tok/s')}  mfu {_n(t.get('mfu'), '')}  ranks {len(t.get('ranks') or [])}")
    for s in d.get("signals") or []:
        lines.append(f"! {s['severity']:<8} {s['name']}: {s.get('message', '')}")
    for c in d.get("root_causes") or []:
        lines.append(f"> {c['cause']} ({c.get('confidence', 0):.0%}): {c.get('summary', '')}")
    return "\n".join(lines)


def _div(value: Any, by: float) -> float | None:
    return None if value is None else value / by


def _n(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}{unit}" if abs(value) >= 100 else f"{value:.3g}{unit}"


def fetch_snapshot(url: str, timeout: float = 2.0) -> dict[str, Any]:
    """GET ``{url}/v1/snapshot``; raises OSError when the daemon is unreachable."""
    with urllib.request.urlopen(url.rstrip("/") + "/v1/snapshot", timeout=timeout) as resp:  # noqa: S310
        return json.load(resp)


def run_top(settings: Settings, remote: str | None = None, once: bool = False) -> int:
    """Print a frame every interval until interrupted (or once)."""
    source = _remote_source(remote) if remote else _local_source(settings)
    stop = threading.Event()
    try:
        while not stop.is_set():
            text = source()
            sys.stdout.write(("" if once else "\x1b[2J\x1b[H") + text + "\n")
            sys.stdout.flush()
            if once:
                break
            stop.wait(settings.interval)
    except KeyboardInterrupt:
        pass
    return 0


def _remote_source(url: str) -> Callable[[], str]:
    def read() -> str:
        try:
            return render_text(fetch_snapshot(url))
        except (OSError, ValueError) as exc:
            return f"TrainPulse  disconnected from {url}: {exc}"

    return read


def _local_source(settings: Settings) -> Callable[[], str]:
    from ..collect.modes import build_collectors
    from ..engine import Engine

    mode, collectors = build_collectors(settings)
    engine = Engine(settings, collectors, mode)

    def read() -> str:
        engine.tick(time.time())
        return render_text(engine.snapshot())

    return read
